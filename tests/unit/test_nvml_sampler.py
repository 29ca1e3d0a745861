"""NvmlSampler: a clean reason without NVML, and its per-phase statistics over readings.

The fake pynvml below stands in for the NVML bindings' call signatures only (nvmlInit,
nvmlDeviceGetUtilizationRates, ...); the readings it returns are synthetic test inputs, not
recorded GPU output.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest

import validation.host.nvml_sampler as nvml_sampler
from tests.waiting import wait_until
from validation.host.nvml_sampler import NvmlSampler


class FakeNvml:
    """The subset of pynvml the sampler calls, with scripted utilization readings."""

    def __init__(self, utilization: list[int], *, devices: int = 1, fail_init: bool = False):
        self._utilization: Iterator[int] = iter(utilization)
        self.devices = devices
        self.fail_init = fail_init
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(total=80 * 2**30, used=(1 + handle) * 2**30)

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=next(self._utilization), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[types.SimpleNamespace]:
        return [types.SimpleNamespace(pid=4242, usedGpuMemory=512 * 2**20)]

    def nvmlShutdown(self) -> None:
        self.shut_down = True


def _with(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml | None) -> None:
    def load() -> FakeNvml:
        if fake is None:
            raise ImportError("No module named 'pynvml'")
        return fake

    monkeypatch.setattr(nvml_sampler, "_load_pynvml", load)


def test_without_pynvml_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, None)
    sampler = NvmlSampler()
    assert not sampler.available
    assert sampler.unavailable_reason == "pynvml (nvidia-ml-py) is not installed"
    with sampler.running(), sampler.phase("x"):
        pass
    assert sampler.summary() is None
    assert sampler.process_memory_mib() == {}


def test_without_a_driver_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, FakeNvml([], fail_init=True))
    sampler = NvmlSampler()
    assert sampler.unavailable_reason is not None
    assert sampler.unavailable_reason.startswith("NVML unavailable (NVML Shared Library")


def test_this_machine_without_gpu_reports_no_gpu_cleanly() -> None:
    """The real pynvml on a GPU-less machine: no exception, and a reason."""
    sampler = NvmlSampler()
    if sampler.available:
        pytest.skip("this machine has an NVIDIA GPU")
    assert sampler.unavailable_reason
    assert sampler.summary() is None


def test_summary_uses_only_samples_taken_inside_phases(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([99, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 0])
    _with(monkeypatch, fake)
    sampler = NvmlSampler()
    sampler.read_once()  # outside any phase: 99 is not kept
    with sampler.phase("tuned"):
        kept = [r for _ in range(10) for r in sampler.read_once()]
    sampler._samples.extend(kept)  # what the thread does with tagged readings
    summary = sampler.summary("tuned")
    assert summary is not None
    gpu = summary["gpu0"]
    assert gpu["samples"] == 10
    assert gpu["mean"] == pytest.approx(55.0)
    assert gpu["p10"] == pytest.approx(19.0)  # numpy's linear 10th percentile of 10..100
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["memory_total_mib"] == 80 * 1024
    assert sampler.summary("other")["gpu0"]["samples"] == 0  # type: ignore[index]
    assert sampler.process_memory_mib(4242) == {"gpu0": 512.0}
    assert sampler.baseline_used_mib == {"gpu0": 1024.0}
    sampler.close()
    assert fake.shut_down


def test_thread_samples_while_running(monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, FakeNvml([50] * 10_000, devices=2))
    sampler = NvmlSampler(interval_s=0.001)
    with sampler.running(), sampler.phase("work"):
        wait_until(
            lambda: all(
                d["samples"] >= 3 for d in (sampler.summary() or {"-": {"samples": 0}}).values()
            ),
            "three samples of each GPU from the sampler's thread",
        )
    summary = sampler.summary()
    assert summary is not None
    assert set(summary) == {"gpu0", "gpu1"}
    assert summary["gpu0"]["samples"] >= 3
    assert summary["gpu1"]["mean"] == 50.0
