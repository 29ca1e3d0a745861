"""The workloads' GPU-side decisions that need no TensorFlow: peaks, bus bandwidth, gating."""

from __future__ import annotations

import argparse

import pytest

from validation.workloads._common import (
    NO_GPU,
    Run,
    WorkloadError,
    _plain,
)
from validation.workloads._devices import check_tensorflow_sees_the_gpus
from validation.workloads.allreduce import bus_bandwidth
from validation.workloads.gemm import parse_peaks
from validation.workloads.mixed_precision import _unsupported


def _run(gpus: list[str], capability: tuple[int, int] | None) -> Run:
    run = Run(workload="test", args=argparse.Namespace(quick=True, seed=0))
    run.gpus = gpus
    run.cpus = ["/device:CPU:0"]
    run.compute_capability = capability
    return run


def test_parse_peaks() -> None:
    assert parse_peaks("fp32=67, tf32=494,FP16=989") == {"fp32": 67.0, "tf32": 494.0, "fp16": 989.0}
    assert parse_peaks(None) == {}
    with pytest.raises(WorkloadError, match="unknown precision 'fp8'"):
        parse_peaks("fp8=1979")
    with pytest.raises(WorkloadError, match="NAME=TFLOPS"):
        parse_peaks("fp16:989")
    with pytest.raises(WorkloadError, match="must be > 0"):
        parse_peaks("fp16=0")


@pytest.mark.parametrize(("ranks", "factor"), [(2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_bandwidth_is_nccl_tests_definition(ranks: int, factor: float) -> None:
    assert bus_bandwidth(100.0, ranks) == pytest.approx(100.0 * factor)


def test_mixed_precision_gating_by_compute_capability() -> None:
    fp16, bf16 = (7, 0), (8, 0)
    volta = _run(["/device:GPU:0"], (7, 0))
    assert _unsupported(volta, fp16) is None
    assert "8.0" in (_unsupported(volta, bf16) or "")
    pascal = _run(["/device:GPU:0"], (6, 0))
    assert "7.0" in (_unsupported(pascal, fp16) or "")
    cpu = _run([], None)
    assert _unsupported(cpu, bf16) is None  # CPU runs both for correctness
    assert cpu.speed_not_applicable == NO_GPU
    assert volta.speed_not_applicable is None


def test_sizes_pick_cpu_then_gpu_tiers() -> None:
    cpu, quick, full = {"n": 1}, {"n": 2}, {"n": 3}
    assert _run([], None).sizes(cpu, quick, full) == cpu
    gpu = _run(["/device:GPU:0"], (9, 0))
    assert gpu.sizes(cpu, quick, full) == quick
    gpu.args.quick = False
    assert gpu.sizes(cpu, quick, full) == full
    assert gpu.config["tier"] == "full"


def test_unknown_threshold_key_is_an_error() -> None:
    run = _run([], None)
    run.thresholds = {"xla_speedup_min": 1.1}
    assert run.threshold("xla_speedup_min") == 1.1
    assert run.config["thresholds"] == {"xla_speedup_min": 1.1}
    with pytest.raises(WorkloadError, match="not defined"):
        run.threshold("xla_speedup_mn")


def test_documents_are_plain_json() -> None:
    import numpy as np

    assert _plain({"a": np.float32(1.5), "b": [float("inf"), np.arange(2)], 3: (1,)}) == {
        "a": 1.5,
        "b": [None, [0, 1]],
        "3": [1],
    }


class _Sampler:
    """Stands in for NvmlSampler: only the attributes the check reads."""

    def __init__(self, devices: int) -> None:
        self.available = devices > 0
        self.devices = list(range(devices))


@pytest.mark.parametrize(
    ("nvml", "tf_gpus", "visible", "expected"),
    [
        (2, 2, None, "pass"),
        (2, 0, None, "fail"),  # driver fine, TensorFlow's CUDA libraries do not load
        (4, 1, "3", "pass"),  # CUDA_VISIBLE_DEVICES narrows what TensorFlow may see
        (2, 0, "", None),  # GPUs hidden on purpose: no check
        (0, 0, None, None),  # no NVML: no check
    ],
)
def test_tensorflow_must_see_the_gpus_nvml_sees(
    monkeypatch: pytest.MonkeyPatch, nvml: int, tf_gpus: int, visible: str | None, expected: str
) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    run = _run([f"/device:GPU:{i}" for i in range(tf_gpus)], None)
    run.sampler = _Sampler(nvml)  # type: ignore[assignment]
    check_tensorflow_sees_the_gpus(run)
    statuses = [c["status"] for c in run.checks if c["name"] == "tensorflow_sees_gpus"]
    assert statuses == ([expected] if expected else [])
