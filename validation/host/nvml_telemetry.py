"""Clocks, power, temperature and clock-event reasons of a timed phase, from NVML samples.

Example:
    >>> sampler = NvmlSampler(telemetry=True)
    >>> with sampler.running(), sampler.phase("fp16"):
    ...     run_gemm()
    >>> phase_telemetry(sampler.samples(), "fp16")["gpu0"]["clock_event_reasons"]
    {'sw_power_cap': 0.93}

Pure: works on validation.host.nvml_sampler.Sample readings, no NVML calls.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from gpufleet.health import BENIGN_REASONS
from validation.host.nvml_sampler import Sample

# NVML's nvmlClocksEventReasons bits (nvml.h; the same values under the older
# nvmlClocksThrottleReason* names), named as nvidia-smi -q -x names them without the prefix,
# so gpufleet.health's lists apply to both.
CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}
# A reason counts as holding the clocks down when at least this share of the phase's readings
# carry it: single readings at the edges of a phase (gpu_idle between two launches) do not.
REASON_MIN_SHARE = 0.10


def clock_event_names(mask: int) -> list[str]:
    """The reasons set in an NVML clock-event bitmask; unknown bits as ``bit_0x...``.

    Example:
        >>> clock_event_names(0x4 | 0x40)
        ['sw_power_cap', 'hw_thermal_slowdown']
    """
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_BITS)
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def device_telemetry(samples: Iterable[Sample]) -> dict[str, Any]:
    """One device's readings summarised: SM clock median/min, power median/max, temperature max,
    the fraction of readings with each clock-event reason, and the non-benign ones seen."""
    mine = list(samples)
    clocks = [s.sm_clock_mhz for s in mine if s.sm_clock_mhz is not None]
    power = [s.power_w for s in mine if s.power_w is not None]
    temps = [s.temperature_c for s in mine if s.temperature_c is not None]
    masks = [s.clock_events for s in mine if s.clock_events is not None]
    counts: dict[str, int] = {}
    for mask in masks:
        for name in clock_event_names(mask):
            counts[name] = counts.get(name, 0) + 1
    reasons = {name: round(n / len(masks), 2) for name, n in sorted(counts.items())}
    return {
        "samples": len(mine),
        "sm_clock_mhz_median": _median(clocks),
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "power_w_median": _median(power),
        "power_w_max": round(max(power), 1) if power else None,
        "temperature_c_max": max(temps) if temps else None,
        "clock_event_reasons": reasons,
        "throttled_by": sorted(
            n
            for n, share in reasons.items()
            if n not in BENIGN_REASONS and share >= REASON_MIN_SHARE
        ),
    }


def phase_telemetry(samples: Iterable[Sample], phase: str) -> dict[str, dict[str, Any]]:
    """Per device ("gpu0", ...): device_telemetry over the readings tagged ``phase``."""
    by_device: dict[str, list[Sample]] = {}
    for sample in samples:
        if sample.phase == phase:
            by_device.setdefault(sample.device, []).append(sample)
    return {device: device_telemetry(found) for device, found in sorted(by_device.items())}


def throttle_note(telemetry: Mapping[str, Mapping[str, Any]]) -> str:
    """One line naming the GPUs whose clocks were held down by a non-benign reason (or "")."""
    parts = [
        f"{device} {'+'.join(entry['throttled_by'])}"
        for device, entry in sorted(telemetry.items())
        if entry.get("throttled_by")
    ]
    return f"clock events during the run: {', '.join(parts)}" if parts else ""
