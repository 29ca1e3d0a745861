"""Counters and limits of one ``nvidia-smi -q -x`` GPU: ECC, retired pages, power, clocks."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")


def _raw(element: ET.Element | None, path: str) -> str | None:
    found = None if element is None else element.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip() or None


def number(element: ET.Element | None, path: str) -> float | None:
    """The leading number at ``path`` ("400.00 W" -> 400.0); None for "N/A" and the like."""
    raw = _raw(element, path)
    match = _NUMBER_RE.match(raw) if raw else None
    return float(match.group()) if match else None


def integer(element: ET.Element | None, path: str) -> int | None:
    value = number(element, path)
    return None if value is None else int(value)


def yes(element: ET.Element | None, path: str) -> bool | None:
    raw = (_raw(element, path) or "").lower()
    return True if raw == "yes" else False if raw == "no" else None


def ecc_count(gpu: ET.Element, scope: str, kind: str) -> int | None:
    """ECC errors of one scope ("volatile": since the driver loaded; "aggregate": the board's
    lifetime, kept in the InfoROM) and kind ("uncorrectable" or "correctable").

    Drivers before ~R450 count ``double_bit`` (uncorrectable) and ``single_bit`` per memory with
    a ``total``; newer ones name each memory's counter ``dram_uncorrectable`` and so on (R570
    splits SRAM into ``_parity``/``_secded``). Every counter that holds a number is summed.
    """
    block = gpu.find(f"ecc_errors/{scope}")
    if block is None:
        return None
    old = block.find("double_bit" if kind == "uncorrectable" else "single_bit")
    if old is not None:
        total = integer(old, "total")
        if total is not None:
            return total
        counts = [integer(child, ".") for child in old]
    else:
        counts = [integer(child, ".") for child in block if kind in child.tag.split("_")]
    numbers = [c for c in counts if c is not None]
    return sum(numbers) if numbers else None


def retired_pages(gpu: ET.Element) -> tuple[int | None, bool | None]:
    """(pages retired for single- and double-bit errors, a retirement pending a GPU reset).

    NVIDIA's Dynamic Page Retirement guide: a DBE retires its page at once, and "Pending Page
    Blacklist" reads Yes until the GPU is reattached (driver reload or reset)."""
    block = gpu.find("retired_pages")
    if block is None:
        return None, None
    counts = [
        integer(block, f"{cause}/retired_count")
        for cause in ("multiple_single_bit_retirement", "double_bit_retirement")
    ]
    numbers = [c for c in counts if c is not None]
    flags = [yes(block, "pending_blacklist"), yes(block, "pending_retirement")]
    known = [f for f in flags if f is not None]
    return (sum(numbers) if numbers else None), (any(known) if known else None)


def power_limits(gpu: ET.Element) -> tuple[float | None, float | None]:
    """(the enforced power limit, the board's default) in W.

    R530+ moved ``power_readings`` to ``gpu_power_readings`` and renamed ``enforced_power_limit``
    (or ``power_limit``) to ``current_power_limit``."""
    for block in ("gpu_power_readings", "power_readings"):
        readings = gpu.find(block)
        if readings is None:
            continue
        enforced = next(
            (
                v
                for tag in ("current_power_limit", "enforced_power_limit", "power_limit")
                if (v := number(readings, tag)) is not None
            ),
            None,
        )
        return enforced, number(readings, "default_power_limit")
    return None, None


def clocks(gpu: ET.Element) -> dict[str, Any]:
    """Applications clock (graphics), its default, and the maximum SM clock, in MHz."""
    default = "default_applications_clocks/graphics_clock"
    return {
        "applications_clock_mhz": integer(gpu, "applications_clocks/graphics_clock"),
        "default_applications_clock_mhz": integer(gpu, default),
        "max_sm_clock_mhz": integer(gpu, "max_clocks/sm_clock"),
    }
