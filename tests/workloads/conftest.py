"""The workloads tier runs real TensorFlow on the CPU: without it every test here is skipped on a
developer's machine and fails in CI (tests/prerequisites.py)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.prerequisites import missing


@pytest.fixture(autouse=True, scope="session")
def _tensorflow_installed() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        missing("TensorFlow is not installed: install the 'workloads' extra (tensorflow-cpu)")
