"""Shared pytest fixtures: where recorded real outputs live, and where deploy stamps go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import quiet

FIXTURES = Path(__file__).parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _deploy_stamps_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every pyinfra run of the suite keeps its deploy stamps (gpufleet.stamp) in a folder of
    this session, never in the machine's own ``~/.local/state``: a stamp left by an earlier
    session must not decide what this one plans. Their key too (GPUFLEET_STAMP_KEY), never
    the machine's own ``~/.config/gpufleet/stamp-key``."""
    folder = tmp_path_factory.mktemp("deploy-stamps")
    names = {"GPUFLEET_STAMP_DIR": str(folder), "GPUFLEET_STAMP_KEY": str(folder) + ".key"}
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _yield_to_a_measuring_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A sandbox-free test waits while an integration test measures on this machine (its
    links' speed would depend on what runs beside it: tests/quiet.py)."""
    if request.node.get_closest_marker("integration"):
        yield
        return
    with quiet.shared():
        yield
