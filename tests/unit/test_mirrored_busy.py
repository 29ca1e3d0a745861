"""mirrored's every-GPU-busy check on constructed NVML readings: a model outside scope() fails."""

from __future__ import annotations

import argparse

import pytest

from gpufleet.floors.derived import floors_for
from validation.host.nvml_sampler import Sample
from validation.workloads._common import Run
from validation.workloads._scaling import busy_verdict, per_gpu_means
from validation.workloads.mirrored import every_gpu_busy

A100 = "NVIDIA A100-SXM4-40GB"


class RecordedSampler:
    """Stands in for NvmlSampler: returns the given readings as its thinned samples."""

    available = True
    unavailable_reason = None

    def __init__(self, readings: dict[str, list[float]]) -> None:
        self.readings = readings
        self.phases: list[str] = []

    def phase(self, label: str):  # type: ignore[no-untyped-def]
        import contextlib

        self.phases.append(label)
        return contextlib.nullcontext()

    def thinned(self, phase: str, device: str) -> list[Sample]:
        values = self.readings.get(device, [])
        return [Sample(float(i), device, phase, v, 1000.0) for i, v in enumerate(values)]


def _run(readings: dict[str, list[float]]) -> Run:
    run = Run(workload="mirrored", args=argparse.Namespace(quick=False, seed=0))
    run.gpus = [f"/device:GPU:{i}" for i in range(8)]
    run.gpu_model = A100
    run.floors = {f.name: f for f in floors_for(A100, 8, "nvswitch")}
    run.sampler = RecordedSampler(readings)  # type: ignore[assignment]
    return run


def _check(run: Run) -> dict:
    every_gpu_busy(run, lambda: None, 0.0)
    (check,) = run.checks
    return check


def test_every_gpu_busy_passes_a_healthy_mirrored_phase() -> None:
    check = _check(_run({f"gpu{i}": [96.0, 97.0, 98.0] for i in range(8)}))
    assert check["status"] == "pass", check
    assert check["kind"] == "utilization"


def test_model_built_outside_strategy_scope_fails_naming_the_idle_gpus() -> None:
    # Outside strategy.scope() the variables live on GPU 0: it does all the work.
    readings = {"gpu0": [99.0, 98.0, 99.0]} | {f"gpu{i}": [2.0, 0.0, 1.0] for i in range(1, 8)}
    run = _run(readings)
    check = _check(run)
    assert check["status"] == "fail"
    assert "gpu1, gpu2, gpu3, gpu4, gpu5, gpu6, gpu7 below 80 %" in check["reason"]
    assert run.metrics["gpu_utilization_pct"]["gpu0"] == pytest.approx(98.7)
    assert run.config["floors"]["mirrored.gpu_utilization_pct"]["value"] == 80.0


def test_one_gpu_lagging_fails_on_the_spread() -> None:
    readings = {f"gpu{i}": [97.0] * 3 for i in range(7)} | {"gpu7": [81.0] * 3}
    check = _check(_run(readings))
    assert check["status"] == "fail"
    assert "spread 16 points > 15" in check["reason"]


def test_a_gpu_without_readings_is_inconclusive_not_a_pass() -> None:
    check = _check(_run({f"gpu{i}": [97.0] * 3 for i in range(7)}))
    assert check["status"] == "inconclusive"
    assert "gpu7" in check["reason"]


def test_busy_verdict_and_means_are_pure() -> None:
    assert per_gpu_means({"gpu0": [90.0, 100.0], "gpu1": []}) == {"gpu0": 95.0}
    assert busy_verdict({"gpu0": 95.0}, ["gpu0"], None, 15.0).status == "inconclusive"
    assert busy_verdict({"gpu0": 95.0, "gpu1": 90.0}, ["gpu0", "gpu1"], 80, 15).status == "pass"
