"""`gpufleet drift` names an inventory problem and a preflight refusal, not "unreachable"."""

from __future__ import annotations

from pathlib import Path

from gpufleet.drift.check import data_errors
from gpufleet.drift.plan import PlanRun, build_report


def test_a_typo_in_the_inventory_is_an_error_with_its_origin(tmp_path: Path) -> None:
    # review §3 item 2: drift called a typo'd key "unreachable"
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "gpus.py").write_text("driver_brnach = 580\n")
    inventory = str(tmp_path / "inv.py")
    entries = [
        {"name": "gpu-a", "groups": ["gpus", "inv"], "data": {"driver_brnach": 580}},
        {"name": "gpu-b", "groups": ["cpus", "inv"], "data": {"gpu_less": True}},
    ]
    errors = data_errors(inventory, entries)
    assert list(errors) == ["gpu-a"]
    assert "unknown inventory key 'driver_brnach'. Did you mean 'driver_branch'?" in errors["gpu-a"]
    assert errors["gpu-a"].endswith("(set in " + str(tmp_path / "group_data" / "gpus.py") + ")")


def test_the_preflight_reason_is_kept_when_every_host_is_refused() -> None:
    # review §3 item 1: only "No hosts remaining!" reached the operator
    refusal = "gpufleet preflight refused this host: no NVIDIA GPU on the PCI bus. Fix: seat it"
    stderr = (
        "--> Connecting to hosts...\n"
        "    [@local] Connected\n"
        "--> Preparing operation files...\n"
        f"    [@local] {refusal}\n"
        "--> pyinfra error in gpufleet/stages/preflight.py line 42: No hosts remaining!\n"
    )
    report = build_report(["@local"], PlanRun(returncode=1, stdout="", stderr=stderr))
    host = report.hosts["@local"]
    assert host.status == "error" and host.reason == refusal
    assert report.exit_status == 2
