"""GPU utilization and memory sampled through NVML in a thread (what `nvidia-smi dmon` shows).

Example:
    >>> sampler = NvmlSampler(interval_s=0.1)
    >>> with sampler.running():
    ...     with sampler.phase("tuned"):
    ...         train()
    >>> sampler.summary()   # {"gpu0": {"mean": 87.5, "p10": 71.0, "samples": 42, ...}}

pynvml (the nvidia-ml-py package) is optional: without it, or without a GPU, ``available`` is
False and ``unavailable_reason`` says why, so the workloads can report it cleanly.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufleet.compat import zip_strict


@dataclass(frozen=True)
class Sample:
    """One reading of one device, tagged with the phase that was being timed (or None)."""

    time_s: float
    device: str
    phase: str | None
    utilization_pct: float
    memory_used_mib: float
    # Read only with NvmlSampler.telemetry on (validation.host.nvml_telemetry summarises them):
    # SM clock, board power, GPU temperature and the clock-event (throttle) reason bitmask.
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    clock_events: int | None = None


@dataclass(frozen=True)
class NvmlDevice:
    """Static facts about one GPU as NVML reports them."""

    index: int
    name: str
    uuid: str
    memory_total_mib: float
    pci_bus_id: str = ""  # "00000000:3B:00.0", as nvmlDeviceGetPciInfo's busId gives it


def _load_pynvml() -> Any:
    import pynvml  # nvidia-ml-py; optional on purpose

    return pynvml


class NvmlSampler:
    """Samples every GPU's utilization and memory while phases are being timed."""

    def __init__(
        self, interval_s: float = 0.1, window_s: float = 1.0, *, telemetry: bool = False
    ) -> None:
        self.interval_s = interval_s
        # Clocks, power, temperature and clock-event reasons too (a few more NVML calls per
        # reading): the GEMM workload turns it on to attach them to its speed verdicts.
        self.telemetry = telemetry
        # NVML's utilization is an average over a window of 1/6 s to 1 s (by product): readings
        # closer together than that repeat one average. thinned() keeps one per window.
        self.window_s = window_s
        self._changes: list[tuple[float, str | None]] = []
        self.devices: list[NvmlDevice] = []
        # Memory in use per device when the sampler opened (before TensorFlow touched the GPU).
        self.baseline_used_mib: dict[str, float] = {}
        self.unavailable_reason: str | None = None
        self._samples: list[Sample] = []
        self._phase: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list[Any] = []
        self._nvml: Any = None
        self._open()

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None

    def _open(self) -> None:
        try:
            nvml = _load_pynvml()
        except ImportError:
            self.unavailable_reason = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            self.unavailable_reason = f"NVML unavailable ({exc})"
            return
        if count == 0:
            self.unavailable_reason = "NVML reports no devices"
            return
        self._nvml = nvml
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            self._handles.append(handle)
            self.baseline_used_mib[f"gpu{index}"] = memory.used / 2**20
            self.devices.append(
                NvmlDevice(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_total_mib=memory.total / 2**20,
                    pci_bus_id=_bus_id(nvml, handle),
                )
            )

    def read_once(self) -> list[Sample]:
        """One reading of every device now (empty when NVML is unavailable)."""
        if not self.available:
            return []
        now = time.monotonic()
        readings = []
        for device, handle in zip_strict(self.devices, self._handles):
            rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            extra = self._telemetry(handle) if self.telemetry else {}
            readings.append(
                Sample(
                    now,
                    f"gpu{device.index}",
                    self._phase,
                    float(rates.gpu),
                    memory.used / 2**20,
                    **extra,
                )
            )
        return readings

    def _telemetry(self, handle: Any) -> dict[str, Any]:
        """SM clock (MHz), power (W), temperature (C), clock-event reasons; None where the
        driver does not report one (power on some boards, event reasons before r535's name)."""
        nvml = self._nvml
        calls: dict[str, Any] = {
            "sm_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "temperature_c": lambda: float(
                nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            ),
            "clock_events": lambda: int(_clock_events(nvml, handle)),
        }
        values: dict[str, Any] = {}
        for name, call in calls.items():
            try:
                values[name] = call()
            except Exception:  # NVMLError_NotSupported and friends: that reading is absent
                values[name] = None
        return values

    def process_memory_mib(self, pid: int | None = None) -> dict[str, float]:
        """GPU memory that process ``pid`` (default: this one) holds on each device, in MiB."""
        if not self.available:
            return {}
        pid = os.getpid() if pid is None else pid
        held: dict[str, float] = {}
        for device, handle in zip_strict(self.devices, self._handles):
            processes = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            used = sum((p.usedGpuMemory or 0) for p in processes if p.pid == pid)
            held[f"gpu{device.index}"] = used / 2**20
        return held

    def mig_parent_uuid(self, mig_uuid: str) -> str | None:
        """The UUID of the GPU a MIG instance ("MIG-...") belongs to; None when NVML cannot say."""
        if not self.available:
            return None
        try:
            mig = self._nvml.nvmlDeviceGetHandleByUUID(mig_uuid)
            parent = self._nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
            return _text(self._nvml.nvmlDeviceGetUUID(parent))
        except Exception:  # NVMLError_NotFound, or a driver without MIG
            return None

    def busy_reason(self) -> str | None:
        """``GPU busy (PIDs ...)`` when another process uses a GPU or one is over 5 % busy
        (validation.host.gpu_busy); None when idle or without NVML (nothing to tell)."""
        if not self.available:
            return None
        from validation.host.gpu_busy import busy_reason, from_nvml, visible

        wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
        if wanted is not None:  # a MIG instance stands for the GPU it lives on
            entries = [e.strip() for e in wanted.split(",")]
            wanted = ",".join(
                (self.mig_parent_uuid(e) or e) if e.startswith("MIG-") else e for e in entries
            )
        mine = visible([d.index for d in self.devices], [d.uuid for d in self.devices], wanted)
        names = [str(self.devices[i].index) for i in mine]
        handles = [self._handles[i] for i in mine]
        try:
            users, utilization = from_nvml(self._nvml, handles, names)
        except Exception as exc:  # NVMLError: say so rather than judge speed blind
            return f"GPU busy state unknown (NVML: {exc})"
        return busy_reason(users, utilization, own_pids={os.getpid()})

    def _loop(self) -> None:
        while not self._stop.is_set():
            readings = self.read_once()
            with self._lock:
                self._samples.extend(r for r in readings if r.phase is not None)
            self._stop.wait(self.interval_s)

    @contextmanager
    def running(self) -> Iterator[NvmlSampler]:
        """Run the sampling thread for the duration of the block (a no-op without NVML)."""
        if not self.available:
            yield self
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            self._thread = None

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Tag the samples taken inside the block with ``label``; untagged ones are dropped."""
        previous, self._phase = self._phase, label
        # A change is a different label from the last one timed (the untagged gaps between
        # calls of the same phase last microseconds).
        if not self._changes or self._changes[-1][1] != label:
            self._changes.append((time.monotonic(), label))
        try:
            yield
        finally:
            self._phase = previous

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def thinned(self, phase: str, device: str) -> list[Sample]:
        """The readings of ``device`` in ``phase`` that can count as independent samples.

        Drops readings taken within one averaging window after any phase change (their average
        still covers the previous phase) and keeps at most one reading per window.
        """
        return thin(self.samples(), self._changes, phase, device, self.window_s)

    def summary(self, phase: str | None = None) -> dict[str, dict[str, Any]] | None:
        """Per device: mean and 10th-percentile utilization (%), sample count and peak memory.

        Over every timed phase, or only ``phase``. None when NVML is unavailable.
        """
        if not self.available:
            return None
        chosen = [s for s in self.samples() if phase is None or s.phase == phase]
        result: dict[str, dict[str, Any]] = {}
        for device in self.devices:
            key = f"gpu{device.index}"
            mine = [s for s in chosen if s.device == key]
            utilization = np.array([s.utilization_pct for s in mine], dtype=float)
            result[key] = {
                "name": device.name,
                "mean": float(utilization.mean()) if mine else None,
                "p10": float(np.percentile(utilization, 10)) if mine else None,
                "samples": len(mine),
                "memory_used_mib_max": max((s.memory_used_mib for s in mine), default=None),
                "memory_total_mib": device.memory_total_mib,
            }
        return result

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None
            self.unavailable_reason = self.unavailable_reason or "NVML closed"


def thin(
    samples: list[Sample],
    changes: list[tuple[float, str | None]],
    phase: str,
    device: str,
    window_s: float,
) -> list[Sample]:
    """One reading per ``window_s`` of ``device`` in ``phase``, none within ``window_s`` of a
    phase change (``changes``: (monotonic time, new phase) as NvmlSampler.phase records)."""
    times = sorted(t for t, _ in changes)
    kept: list[Sample] = []
    for sample in sorted(samples, key=lambda s: s.time_s):
        if sample.phase != phase or sample.device != device:
            continue
        if any(0.0 <= sample.time_s - t < window_s for t in times):
            continue
        if kept and sample.time_s - kept[-1].time_s < window_s:
            continue
        kept.append(sample)
    return kept


def _clock_events(nvml: Any, handle: Any) -> int:
    """The clock-event reason bitmask; drivers/bindings before "event" called it "throttle"."""
    reader = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if reader is None:
        reader = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(reader(handle))


def _bus_id(nvml: Any, handle: Any) -> str:
    """The GPU's PCI bus id, upper case ("00000000:3B:00.0"); "" where NVML gives none."""
    try:
        return _text(nvml.nvmlDeviceGetPciInfo(handle).busId).upper()
    except Exception:  # a fake or an old binding without PCI info
        return ""


def _text(value: str | bytes) -> str:
    """NVML returns bytes in older bindings and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else value
