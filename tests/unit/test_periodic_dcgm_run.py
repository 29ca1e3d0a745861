"""A whole periodic run's DCGM part: a stand-in dcgmi printing a recorded real document, and a
GPU-less host that says why DCGM did not run (the textfile and results carry both)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_periodic import ROOT, fake_pci_bus, latest, parse_prom, replay, run

__all__ = ["replay"]  # the fixture, used by name


def test_the_textfile_carries_the_dcgm_level_1_result_of_a_real_dcgmi_run(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dcgmi is a stand-in script printing a recorded real level-1 document (GB10, DCGM 4.2.3,
    # exit 226); the periodic run starts it as a subprocess, as on a host.
    recorded = ROOT / "tests" / "fixtures" / "dcgm" / "dcgm4-gb10-r1-software-fail.json"
    fake_pci_bus(tmp_path, monkeypatch, "0x030200")
    for name, body in (
        ("nvidia-smi", "echo Disabled"),
        ("dcgmi", f"/bin/cat {recorded}\nexit 226"),
    ):
        (tmp_path / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    assert run(tmp_path, replay, "--workloads", "xla") == 1
    doc = latest(tmp_path)
    dcgm = doc["vendor"]["dcgm"]
    assert (dcgm["level"], dcgm["status"], dcgm["exit_code"]) == (1, "fail", 226)
    assert [(t["name"], t["gpu"], t["status"]) for t in dcgm["tests"]] == [
        ("software", "0", "fail")
    ]
    assert doc["vendor"]["nccl_tests"] is None  # the periodic run never runs nccl-tests
    metrics = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    result = {s.labels["status"]: s.value for s in metrics["gpufleet_dcgm_diag_result"]}
    assert result["fail"] == 1 and result["pass"] == 0
    test = metrics["gpufleet_dcgm_diag_test_passed"]
    assert [(dict(s.labels), s.value) for s in test] == [
        ({"host": doc["host"], "level": "1", "test": "software", "gpu": "0"}, 0.0)
    ]


def test_a_gpu_less_periodic_run_says_why_dcgm_did_not_run(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pci_bus(tmp_path, monkeypatch)  # no NVIDIA function at all
    assert run(tmp_path, replay, "--workloads", "xla") == 0
    dcgm = latest(tmp_path)["vendor"]["dcgm"]
    assert (dcgm["status"], dcgm["overall"], dcgm["level"]) == ("skip", None, 1)
    assert "no NVIDIA GPU" in dcgm["reason"]
    metrics = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    result = {s.labels["status"]: s.value for s in metrics["gpufleet_dcgm_diag_result"]}
    assert result == {"pass": 0, "fail": 0, "error": 0, "skip": 1, "warn": 0}
