"""NVML <-> CUDA device mapping by PCI bus id and UUID/MIG, and the GPU-busy guard.

nvidia-smi outputs come from tests/fixtures/gpu_processes (sources in its SOURCES.md). The
NVML devices and the fake pynvml are synthetic stand-ins for the bindings' call signatures;
their UUIDs and bus ids are made up for the test, not recorded output.
"""

from __future__ import annotations

import argparse
import types
from pathlib import Path

import pytest

import validation.host.nvml_sampler as nvml_sampler
from validation.host.gpu_busy import (
    GpuUser,
    busy_reason,
    check_with_nvidia_smi,
    from_nvidia_smi,
    parse_gpu_utilization,
)
from validation.host.nvml_sampler import NvmlDevice, NvmlSampler
from validation.workloads import _devices
from validation.workloads._devices import map_devices, nvml_index, pci_key, resolve_visible
from validation.workloads._floors import host_kind
from validation.workloads._run import Run
from validation.workloads._topology import GpuTopology

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_processes"
UUID = "GPU-{}aaaaaaa-1111-2222-3333-444444444444"
# NVML numbered these 0..3, but not in bus order (NVML promises no order).
DEVICES = [
    NvmlDevice(0, "NVIDIA A100-SXM4-80GB", UUID.format(0), 81920.0, "00000000:87:00.0"),
    NvmlDevice(1, "NVIDIA A100-SXM4-80GB", UUID.format(1), 81920.0, "00000000:07:00.0"),
    NvmlDevice(2, "NVIDIA A100-SXM4-80GB", UUID.format(2), 81920.0, "00000000:0F:00.0"),
    NvmlDevice(3, "NVIDIA A100-SXM4-80GB", UUID.format(3), 81920.0, "00000000:B7:00.0"),
]


def test_pci_bus_ids_compare_in_every_spelling() -> None:
    # NVML's busId, and TensorFlow's "pci bus id: 0001:0f:00.0" (NVIDIA/DALI#1813's T4 host).
    assert pci_key("00000000:0F:00.0") == pci_key("0000:0f:00.0") == (0, 0x0F, 0, 0)
    assert pci_key("0001:0f:00.0") == (1, 0x0F, 0, 0)
    assert pci_key("not a bus id") is None


def test_cuda_ordinals_are_pci_bus_order_not_nvml_order() -> None:
    assert resolve_visible(None, DEVICES) == [1, 2, 0, 3]
    assert resolve_visible("0,2", DEVICES) == [1, 0]
    assert resolve_visible("7", DEVICES) == [None]
    # CUDA: "0,2,-1,1" makes 0 and 2 visible and hides the rest (CUDA environment variables).
    assert resolve_visible("0,2,-1,1", DEVICES) == [1, 0, None]


def test_uuid_prefix_and_mig_entries_resolve_through_nvml() -> None:
    assert resolve_visible(UUID.format(3), DEVICES) == [3]
    assert resolve_visible("GPU-2aaa", DEVICES) == [2]  # a unique prefix, as CUDA accepts
    assert resolve_visible("GPU-", DEVICES) == [None]  # ambiguous
    legacy = f"MIG-{UUID.format(2)}/1/0"  # MIG-GPU-<uuid>/<gi>/<ci> (drivers before 470)
    assert resolve_visible(legacy, DEVICES) == [2]
    parents = {"MIG-5f1e": UUID.format(0)}
    assert resolve_visible("MIG-5f1e", DEVICES, parents.get) == [0]
    assert resolve_visible("MIG-unknown", DEVICES, parents.get) == [None]


def _run_with(devices: list[NvmlDevice], gpus: int) -> Run:
    run = Run(workload="gemm", args=argparse.Namespace(quick=True))
    run.gpus = [f"/device:GPU:{i}" for i in range(gpus)]
    sampler = NvmlSampler.__new__(NvmlSampler)  # no NVML here: only what map_devices reads
    sampler.devices, sampler.unavailable_reason = devices, None
    sampler._nvml = None
    run.sampler = sampler
    return run


def test_map_devices_feeds_nvml_index_for_uuid_visible_devices(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUID.format(3)},{UUID.format(0)}")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setattr(_devices, "_MAPPING", {})
    run = _run_with(DEVICES, 2)
    assert map_devices(run) == {0: 3, 1: 0}
    assert nvml_index(0) == 3 and nvml_index(1) == 0  # before: the digit rule gave 0 and 1
    assert run.config["nvml_mapping"]["note"] is None


def test_host_kind_reads_the_topology_class_as_allreduce_records_it() -> None:
    run = Run(workload="gemm", args=argparse.Namespace(quick=True))
    run.gpus = [f"/device:GPU:{i}" for i in range(8)]
    run.gpu_model = "NVIDIA A100-SXM4-80GB"
    run.config["topology"] = GpuTopology("nvlink", 8, {"NV12": 28}, "NV12", "all").to_dict()
    assert host_kind(run) == ("NVIDIA A100-SXM4-80GB", 8, "nvlink")


def test_busy_reason_names_other_processes_and_hot_gpus() -> None:
    users = [GpuUser(4242, "python3", "1"), GpuUser(99, "me", "0")]
    assert busy_reason(users, {"0": 0.0, "1": 97.0}, own_pids={99}) == (
        "GPU busy (PIDs 4242 python3 on GPU 1; GPU 1 at 97 % utilization)"
    )
    assert busy_reason([GpuUser(99, "me", "0")], {"0": 3.0}, own_pids={99}) is None
    assert busy_reason([], {"2": 6.0}) == "GPU busy (GPU 2 at 6 % utilization)"


def test_nvidia_smi_queries_of_a_busy_host() -> None:
    text = (FIXTURES / "query_gpu_index_uuid_utilization_4_gpus.csv").read_text()
    uuids, utilization = parse_gpu_utilization(text)
    assert utilization == {"0": 0.0, "1": 0.0, "2": 98.0, "3": 0.0}
    assert uuids["GPU-f7c1496c-b7f5-b1d2-78ea-68826f778059"] == "2"
    apps = (FIXTURES / "apps_uuid_pid_memory_3_processes.csv").read_text()

    def fake_run(command, **_):
        out = text if "--query-gpu=index,uuid,utilization.gpu" in command else apps
        return types.SimpleNamespace(returncode=0, stdout=out, stderr="")

    users, _ = from_nvidia_smi(fake_run)
    assert sorted((u.pid, u.gpu) for u in users) == [(1912379, "0"), (1912379, "3"), (3891903, "2")]
    reason = check_with_nvidia_smi(run=fake_run)
    assert reason is not None and reason.startswith("GPU busy (PIDs 1912379 ? on GPU 0")
    assert "GPU 2 at 98 % utilization" in reason


def test_an_unreadable_gpu_state_counts_as_busy() -> None:
    def failing(command, **_):
        return types.SimpleNamespace(
            returncode=9, stdout="", stderr="NVIDIA-SMI has failed because it couldn't communicate"
        )

    reason = check_with_nvidia_smi(run=failing)
    assert reason is not None and reason.startswith("GPU busy state unknown")


class _Nvml:
    """pynvml's call signatures the sampler's telemetry and busy check use (stand-in)."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int):
        return types.SimpleNamespace(total=80 * 2**30, used=2**30)

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}"

    def nvmlDeviceGetPciInfo(self, handle: int):
        return types.SimpleNamespace(busId=f"00000000:{0x18 + handle:02x}:00.0".encode())

    def nvmlDeviceGetUtilizationRates(self, handle: int):
        return types.SimpleNamespace(gpu=0 if handle == 0 else 2, memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int):
        return [types.SimpleNamespace(pid=555, usedGpuMemory=2**30)] if handle == 1 else []

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        return b"/usr/bin/python3"

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 690_000

    def nvmlDeviceGetTemperature(self, handle: int, kind: int) -> int:
        return 71

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return 0x4


def test_sampler_reads_bus_ids_telemetry_and_busy_state(monkeypatch) -> None:
    monkeypatch.setattr(nvml_sampler, "_load_pynvml", _Nvml)
    monkeypatch.setattr("validation.host.gpu_busy.READING_GAP_S", 0.0)
    sampler = NvmlSampler(telemetry=True)
    assert [d.pci_bus_id for d in sampler.devices] == ["00000000:18:00.0", "00000000:19:00.0"]
    sample = sampler.read_once()[0]
    assert (sample.sm_clock_mhz, sample.power_w, sample.temperature_c) == (1980.0, 690.0, 71.0)
    assert sample.clock_events == 0x4
    assert sampler.busy_reason() == "GPU busy (PIDs 555 python3 on GPU 1)"
    quiet = NvmlSampler()
    assert quiet.read_once()[0].sm_clock_mhz is None  # telemetry off: not read


def test_a_mig_gpu_without_utilization_is_judged_by_its_processes(monkeypatch) -> None:
    class Mig(_Nvml):
        def nvmlDeviceGetUtilizationRates(self, handle: int):
            raise RuntimeError("Not Supported")  # what NVML says for a MIG-enabled GPU

    monkeypatch.setattr(nvml_sampler, "_load_pynvml", Mig)
    monkeypatch.setattr("validation.host.gpu_busy.READING_GAP_S", 0.0)
    assert NvmlSampler().busy_reason() == "GPU busy (PIDs 555 python3 on GPU 1)"


@pytest.mark.parametrize("method", ["sample_check", "ab"])
def test_a_busy_run_makes_speed_checks_inconclusive(method: str) -> None:
    run = Run(workload="gemm", args=argparse.Namespace(quick=True))
    run.gpus = ["/device:GPU:0"]
    run.busy = "GPU busy (PIDs 4242 python3 on GPU 0)"
    if method == "sample_check":
        run.sample_check("x", "x", [1.0, 1.0, 1.0], threshold=100.0, what="figure")
    else:
        run.ab("x", "x", lambda: None, lambda: None, threshold=9.0, pairs=3, device="GPU:0")
    (check,) = run.checks
    assert check["status"] == "inconclusive" and check["reason"] == run.busy


def test_the_busy_guard_sees_only_this_processs_gpu(monkeypatch) -> None:
    """Review 2, N3: the full tier's resnet50 processes run one per GPU at once; the old guard
    judged every GPU, so GPU 0's process saw GPU 1's sibling and went inconclusive."""
    monkeypatch.setattr(nvml_sampler, "_load_pynvml", _Nvml)
    monkeypatch.setattr("validation.host.gpu_busy.READING_GAP_S", 0.0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert NvmlSampler().busy_reason() is None  # the sibling (PID 555) is on GPU 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1")
    assert NvmlSampler().busy_reason() == "GPU busy (PIDs 555 python3 on GPU 1)"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert NvmlSampler().busy_reason() == "GPU busy (PIDs 555 python3 on GPU 1)"


def test_visible_devices_follow_cuda_rules() -> None:
    from validation.host.gpu_busy import visible

    uuids = ["GPU-aa", "GPU-bb", "GPU-cc"]
    assert visible([0, 1, 2], uuids, None) == [0, 1, 2]
    assert visible([0, 1, 2], uuids, "2,0") == [2, 0]
    assert visible([0, 1, 2], uuids, "GPU-b") == [1]
    assert visible([0, 1, 2], uuids, "1,-1,2") == [1]  # CUDA stops at an invalid entry
    assert visible([0, 1, 2], uuids, "") == []
