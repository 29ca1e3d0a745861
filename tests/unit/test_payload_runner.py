"""The payload's runner/ carries everything pytest and testinfra need on a node's Python.

`validate --dispatch jobs` runs the suite on the node with the environment's Python and
runner/ on PYTHONPATH. Its first sandbox run died on a 3.10 environment: pytest needs
exceptiongroup and tomli there, and runner/ had neither. This walks the real requirements
(their markers evaluated for each Python a node environment may have) and checks each one's
import names are shipped.
"""

from __future__ import annotations

import importlib.metadata as metadata
import io
import tarfile

import pytest
from packaging.requirements import Requirement

from gpufleet.stages.validation_payload import payload_archive

ROOTS = ("pytest", "pytest-testinfra")
NODE_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def needed(python: str) -> set[str]:
    """Every distribution ROOTS need under ``python`` (on Linux, no extras), ROOTS included."""
    env = {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}
    env |= {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
    seen: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return seen


def import_names(distribution: str) -> set[str]:
    """The top-level import names a distribution installs (from its RECORD)."""
    names = set()
    for file in metadata.distribution(distribution).files or []:
        top = file.parts[0]
        # A compiled top-level module (tomli's mypyc runtime) has its .py beside it.
        if top.endswith((".dist-info", ".data", ".so")) or top in ("..", "__pycache__"):
            continue
        names.add(top.removesuffix(".py"))
    return names


@pytest.fixture(scope="module")
def runner_names() -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(payload_archive()), mode="r:gz") as tar:
        names = tar.getnames()
    return {
        n.split("/")[1].removesuffix(".py") for n in names if n.startswith("runner/") and "/" in n
    }


@pytest.mark.parametrize("python", NODE_PYTHONS)
def test_every_requirement_of_pytest_and_testinfra_is_shipped(python, runner_names):
    missing = {
        dist: sorted(import_names(dist) - runner_names)
        for dist in needed(python)
        if import_names(dist) - runner_names
    }
    assert not missing, f"runner/ lacks, for a Python {python} node: {missing}"


def test_runner_is_pure_python(runner_names):
    with tarfile.open(fileobj=io.BytesIO(payload_archive()), mode="r:gz") as tar:
        compiled = [n for n in tar.getnames() if n.endswith((".so", ".pyc"))]
    assert not compiled
    assert {"tomli", "exceptiongroup", "typing_extensions"} <= runner_names


def test_a_3_10_node_needs_what_3_11_has_built_in():
    assert {"exceptiongroup", "tomli"} <= needed("3.10")
    assert not {"exceptiongroup", "tomli"} & needed("3.11")
