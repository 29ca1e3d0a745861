"""Fixtures shared by several unit test modules."""

from __future__ import annotations

import subprocess

import pytest

from tests.unit.deploy_plan_fleet import plan_fleet


@pytest.fixture(scope="session")
def fleet_plan(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    """The whole-fleet plan (tests/unit/deploy_plan_fleet.py), made once per test session."""
    return plan_fleet(tmp_path_factory.mktemp("fleet"))
