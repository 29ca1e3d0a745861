"""The payload (validation suite and gpufleet itself), versioned on the host, with ``current``.

Layout on the host, the one the periodic unit, ``gpufleet validate`` and the workloads use::

    <payload_dir>/<gpufleet version>/validation/   the validation suite
    <payload_dir>/<gpufleet version>/gpufleet/     gpufleet's package (health, parsers, report)
    <payload_dir>/<gpufleet version>/runner/       pytest and testinfra, for the suite on-node
    <payload_dir>/current -> <gpufleet version>

and code runs there with ``cd <payload_dir>/current && PYTHONPATH=<payload_dir>/current``.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from pyinfra.api import DeployError, deploy

import gpufleet
from gpufleet.operations import payload
from gpufleet.stages.node import NodePlan, node_plan

# The packages shipped, by the name they are imported as on the host.
PACKAGES = ("validation", "gpufleet")
# pytest and testinfra (pure Python, the control node's own copies) under runner/, for the
# suite run on the node itself (`validate --scheduler slurm`); only that job puts runner/ on
# its PYTHONPATH, so the environment's own packages (TensorFlow's packaging) stay first
# everywhere else.
# pytest's own requirements for a node Python before 3.11 (exceptiongroup, tomli and, under
# 3.13, exceptiongroup's typing_extensions) go too: a job on a 3.10 environment failed without
# them (tests/unit/test_payload_runner.py walks the requirements).
RUNNER_PACKAGES = (
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "testinfra",
    "exceptiongroup",
    "tomli",
)
RUNNER_MODULES = ("py", "typing_extensions")  # pytest's py.py shim; one-file modules


def package_source(name: str) -> Path:
    """A package's folder (a checkout's or an installed one's), absolute."""
    found = importlib.util.find_spec(name)
    if found is None or not found.submodule_search_locations:
        raise DeployError(
            f"the {name!r} package is not importable; install gpufleet (pip install -e .) "
            "or run from the repository root"
        )
    return Path(next(iter(found.submodule_search_locations))).resolve()


def payload_sources() -> dict[str, Path]:
    """Every shipped package's folder, by its name in the payload."""
    sources = {name: package_source(name) for name in PACKAGES}
    sources.update({f"runner/{name}": package_source(name) for name in RUNNER_PACKAGES})
    for name in RUNNER_MODULES:
        found = importlib.util.find_spec(name)
        if found is None or not found.origin:
            raise DeployError(f"the {name!r} module is not importable; reinstall pytest")
        sources[f"runner/{name}.py"] = Path(found.origin).resolve()
    return sources


def payload_paths(payload_dir: str) -> tuple[str, str]:
    """(versioned directory, ``current`` link) under ``payload_dir``.

    Example: ``payload_paths("/opt/gpufleet/validation")``
    -> ``("/opt/gpufleet/validation/0.1.0", "/opt/gpufleet/validation/current")``
    """
    root = payload_dir.rstrip("/")
    return f"{root}/{gpufleet.__version__}", f"{root}/current"


@lru_cache(maxsize=4)
def payload_archive(sources: tuple[tuple[str, Path], ...] | None = None) -> bytes:
    """The payload's .tar.gz, built once per run and shared by every host."""
    return payload.make_archive(dict(sources) if sources else payload_sources())


@deploy("gpufleet validation_payload")
def validation_payload(plan: NodePlan | None = None, sources: dict[str, Path] | None = None):
    """
    Install ``validation/`` and ``gpufleet/`` at ``<payload_dir>/<gpufleet version>`` and point
    ``<payload_dir>/current`` at it; the environment's Python runs them from there.

    .. code:: python

        validation_payload()
    """
    plan = plan or node_plan()
    chosen = tuple(sorted((n, p.resolve()) for n, p in sources.items())) if sources else None
    dest, current = payload_paths(plan.spec.payload_dir)
    payload.directory(
        name="validation suite, versioned, with a current link",
        archive=payload_archive(chosen),
        dest_dir=dest,
        current_link=current,
    )
