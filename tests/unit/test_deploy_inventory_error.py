"""A deploy refused for a bad inventory value names where it was set, not gpufleet's source."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from gpufleet.stages.inventory_error import inventory_error, keys_of, origin
from gpufleet.stages.node import InventoryValueError
from tests.conftest import REPO_ROOT


def fake_host(overrides: dict[str, Any], groups: dict[str, dict[str, Any]]) -> Any:
    inventory = SimpleNamespace(
        get_override_data=lambda: overrides, get_group_data=lambda g: groups.get(g, {})
    )
    return SimpleNamespace(name="gpu-a", inventory=inventory, groups=[*groups, *groups])


def test_keys_and_their_origins() -> None:
    message = (
        "host gpu-a: 2 inventory problems:\n  - unknown inventory key 'driver_brnach'. x\n"
        "  - reboot = 'maybe' is not one of"
    )
    assert keys_of(message) == ["driver_brnach", "reboot"]
    host = fake_host({"driver_brnach": 580}, {"a100_nodes": {"reboot": "maybe"}})
    assert origin(host, "driver_brnach") == "--data driver_brnach=580"
    assert origin(host, "reboot") == (
        "the data of group a100_nodes (the inventory, or group_data/a100_nodes.py)"
    )
    assert origin(host, "gpu_count") == "the host data of gpu-a in the inventory"
    error = inventory_error(InventoryValueError, host, message)
    assert isinstance(error, InventoryValueError)  # outside pyinfra's CLI: the plain type


def test_pyinfra_names_the_data_not_a_line_of_gpufleet() -> None:
    # review §3 item 3: "pyinfra error in .../gpufleet/stages/node.py line 90: ..."
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyinfra",
            "tests/unit/fake_prod.py",
            "deploy/gpu_node.py",
            "--dry",
            "--group-data",
            "inventories/group_data",
            "--data",
            "driver_brnach=580",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    # the key came from --data: every host's problem, not the one pyinfra planned first
    assert "--> pyinfra error: every host: unknown inventory key" in out
    assert "unknown inventory key 'driver_brnach'. Did you mean 'driver_branch'?" in out
    assert "(driver_brnach is set in --data driver_brnach=580)" in out
    assert "node.py line" not in out and "Traceback" not in out


def test_the_host_named_is_every_host_the_key_reaches() -> None:
    # one group's key: every host of that group (review §3 row 3: not one arbitrary host)
    host = fake_host({}, {"a100_nodes": {"reboot": "maybe"}})
    text = str(inventory_error(InventoryValueError, host, "host gpu-a: reboot = 'maybe' is x"))
    assert text.startswith("every host of group a100_nodes: reboot = 'maybe'")
    host = fake_host({}, {"a": {"reboot": "maybe"}, "b": {"reboot": "maybe"}})
    text = str(inventory_error(InventoryValueError, host, "host gpu-a: reboot = 'maybe' is x"))
    assert text.startswith("host gpu-a: reboot = 'maybe'")  # two groups: the host's own
    host = fake_host({}, {})
    text = str(inventory_error(InventoryValueError, host, "host gpu-a: reboot = 'maybe' is x"))
    assert text.startswith("host gpu-a: reboot = 'maybe'")  # the host's own data
    text = str(
        inventory_error(
            InventoryValueError, fake_host({"reboot": "x"}, {}), "host gpu-a: reboot = 'x' y"
        )
    )
    assert text.startswith("every host: reboot = 'x' y (reboot is set in --data reboot=x)")


def test_every_host_refused_by_preflight_names_no_line_of_gpufleet(tmp_path) -> None:
    # review §3 rows 1 and 8: "pyinfra error in .../gpufleet/stages/preflight.py line 42: No
    # hosts remaining!" after the refusal read as a bug in gpufleet
    from tests.unit.fake_fleet import FakeGpuHost, write_inventory

    inventory = write_inventory(tmp_path / "inv.py", {"bare": FakeGpuHost(gpus=())})
    proc = subprocess.run(
        [sys.executable, "-m", "pyinfra", str(inventory), "deploy/gpu_node.py", "--dry"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "gpufleet preflight refused this host: no NVIDIA GPU on the PCI bus" in out
    assert "--> pyinfra error: No hosts remaining! (the last one refused by gpufleet" in out
    assert "preflight.py line" not in out and "Traceback" not in out
