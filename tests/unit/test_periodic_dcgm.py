"""The periodic run's DCGM level-1 check over recorded real dcgmi outputs (tests/fixtures/dcgm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validation.periodic import dcgm as periodic_dcgm
from validation.periodic.dcgm import dcgm_check

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def recorded(name: str, rc: int, mig: str = "Disabled\n"):
    text = (FIXTURES / name).read_text()
    calls: list[list[str]] = []

    def run(command: list[str], timeout: int) -> tuple[int | None, str]:
        calls.append(command)
        return (0, mig) if command[0] == "nvidia-smi" else (rc, text)

    return run, calls


@pytest.fixture
def dcgmi_installed(monkeypatch):
    monkeypatch.setattr(periodic_dcgm.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_a_gpu_less_host_skips_saying_why():
    check = dcgm_check({}, gpus_on_bus=lambda: 0)
    assert (check["name"], check["status"]) == ("vendor_diagnostics::dcgm_diag", "skipped")
    assert "no NVIDIA GPU" in check["message"]


def test_level_1_pass_and_fail_from_recorded_runs(dcgmi_installed):
    run, calls = recorded("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0)
    assert dcgm_check({}, run=run, gpus_on_bus=lambda: 8)["status"] == "pass"
    assert calls[-1] == ["dcgmi", "diag", "-r", "1", "-j"]
    run, _ = recorded("dcgm4-gb10-r1-software-fail.json", 226)
    failed = dcgm_check({}, run=run, gpus_on_bus=lambda: 1)
    assert failed["status"] == "fail"
    assert "software failed on GPU 0" in failed["message"]


def test_untrusted_output_fails_and_mig_skips(dcgmi_installed):
    def empty(command, timeout):
        return (0, "Disabled\n") if command[0] == "nvidia-smi" else (0, "")

    assert dcgm_check({}, run=empty, gpus_on_bus=lambda: 1)["status"] == "fail"
    run, calls = recorded("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0, mig="Enabled\n")
    check = dcgm_check({}, run=run, gpus_on_bus=lambda: 1)
    assert check["status"] == "skipped" and "MIG" in check["message"]
    assert all(c[0] != "dcgmi" for c in calls)


def test_off_or_missing_dcgmi(monkeypatch):
    assert dcgm_check({"dcgm": "off"}, gpus_on_bus=lambda: 8)["status"] == "skipped"
    monkeypatch.setattr(periodic_dcgm.shutil, "which", lambda name: None)
    missing = dcgm_check({}, gpus_on_bus=lambda: 8)
    assert missing["status"] == "fail" and "dcgmi is not installed" in missing["message"]
