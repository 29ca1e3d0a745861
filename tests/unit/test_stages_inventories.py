"""The example inventories: each host's data (group_data/all.py + its group) is a valid NodeSpec."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from gpufleet.spec import NodeSpec

INVENTORIES = Path(__file__).resolve().parents[2] / "inventories"


def _fleet_defaults() -> dict:
    values = runpy.run_path(str(INVENTORIES / "group_data" / "all.py"))
    return {k: v for k, v in values.items() if not k.startswith("__")}


def _groups(name: str) -> dict[str, tuple[list[str], dict]]:
    values = runpy.run_path(str(INVENTORIES / name))
    return {k: v for k, v in values.items() if isinstance(v, tuple) and not k.startswith("_")}


@pytest.mark.parametrize("inventory", ["prod.py", "staging.py"])
def test_every_group_resolves_to_a_valid_spec(inventory):
    groups = _groups(inventory)
    assert groups
    for group, (hosts, data) in groups.items():
        assert hosts, group
        spec = NodeSpec.from_host_data({**_fleet_defaults(), **data})
        assert spec.tf_version == "2.21.0"
        assert data.get("_sudo") is True and data.get("ssh_user"), f"{group}: SSH user with sudo"


def test_fleet_defaults_are_each_commented():
    lines = (INVENTORIES / "group_data" / "all.py").read_text().splitlines()
    settings = [line for line in lines if line and line[0].isalpha() and " = " in line]
    assert settings
    assert all("  # " in line for line in settings), [s for s in settings if "  # " not in s]


def test_staging_points_at_mirrors_and_proxy():
    spec = NodeSpec.from_host_data({**_fleet_defaults(), **_groups("staging.py")["h100_nodes"][1]})
    assert spec.nvidia_repo_url.startswith("https://mirror.staging.example.net/")
    assert spec.apt_proxy == "http://proxy.staging.example.net:3128"
