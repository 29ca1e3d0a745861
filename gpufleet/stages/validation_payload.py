"""The validation workloads, copied to a versioned directory on the host with a ``current`` link."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from pyinfra.api import DeployError, deploy

import gpufleet
from gpufleet.operations import payload
from gpufleet.stages.node import NodePlan, node_plan


def validation_source() -> Path:
    """The ``validation`` package's folder (a checkout's or an installed one's), absolute."""
    found = importlib.util.find_spec("validation")
    if found is None or not found.submodule_search_locations:
        raise DeployError(
            "the 'validation' package is not importable; install gpufleet (pip install -e .) "
            "or run from the repository root"
        )
    return Path(next(iter(found.submodule_search_locations))).resolve()


@lru_cache(maxsize=4)
def _archive(source: Path) -> bytes:
    # Built once per run and shared by every host.
    return payload.make_archive(source)


@deploy("gpufleet validation_payload")
def validation_payload(plan: NodePlan | None = None, source: Path | None = None):
    """
    Install the validation suite at ``<payload_dir>/<gpufleet version>`` and point
    ``<payload_dir>/current`` at it; the environment's Python runs it from there.

    .. code:: python

        validation_payload()
    """
    plan = plan or node_plan()
    source = (source or validation_source()).resolve()
    dest = f"{plan.spec.payload_dir.rstrip('/')}/{gpufleet.__version__}"
    payload.directory(
        name="validation suite, versioned, with a current link",
        archive=_archive(source),
        dest_dir=dest,
        current_link=f"{plan.spec.payload_dir.rstrip('/')}/current",
    )
