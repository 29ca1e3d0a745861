"""Parse ``nvidia-smi --query-gpu ... --format=csv`` and ``nvidia-smi -q -x`` output."""

from __future__ import annotations

import csv
import dataclasses
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.compat import zip_strict
from gpufleet.parsers import nvidia_smi_counters as counters


class NvidiaSmiParseError(ValueError):
    """The text is not nvidia-smi output of the expected kind."""


# Words nvidia-smi prints instead of a value. CSV output wraps them in brackets
# ("[N/A]", "[Not Supported]"); the XML and the nounits CSV of older drivers use them bare.
_PLACEHOLDER_WORDS = frozenset(
    word.lower()
    for word in (
        "N/A",
        "Not Supported",
        "Requested functionality has been deprecated",
        "Insufficient Permissions",
        "Unknown Error",
        "Unknown",
        "Not Found",
        "GPU is lost",
        "No data",
    )
)

# Units nvidia-smi appends to CSV values when the header does not declare them
# (`--format=csv,noheader` keeps "52 %" but has no header to say so).
_KNOWN_UNITS = ("%", "MiB", "KiB", "GiB", "W", "MHz", "C", "ms", "us", "mV", "KB/s")
_NUMBER_WITH_UNIT_RE = re.compile(
    r"^(?P<number>-?\d+(?:\.\d+)?) (?P<unit>" + "|".join(map(re.escape, _KNOWN_UNITS)) + r")$"
)
_HEADER_UNIT_RE = re.compile(r"^(?P<key>.*?) \[(?P<unit>[^\]]+)\]$")


def _is_placeholder(value: str) -> bool:
    stripped = value.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        return True  # every bracketed CSV value is a placeholder: "[GPU requires reset]", ...
    return stripped.lower() in _PLACEHOLDER_WORDS


# --- CSV --------------------------------------------------------------------------------------


def _split_header(cell: str) -> tuple[str, str | None]:
    match = _HEADER_UNIT_RE.match(cell.strip())
    if match:
        return match["key"], match["unit"]
    return cell.strip(), None


def _clean_value(raw: str, unit: str | None) -> str | None:
    value = raw.strip()
    if _is_placeholder(value):
        return None
    if unit is not None and value.endswith(" " + unit):
        return value[: -len(unit) - 1].strip()
    if unit is None:
        # No header to declare a unit: drop one only when the value is "<number> <unit>".
        match = _NUMBER_WITH_UNIT_RE.match(value)
        if match:
            return match["number"]
    return value


def parse_nvidia_smi_csv(
    text: str, fields: Sequence[str] | None = None
) -> list[dict[str, str | None]]:
    """Rows of ``nvidia-smi --query-*=... --format=csv[,noheader][,nounits]`` as dicts.

    Keys come from the header with its `` [unit]`` suffix removed, or from ``fields`` (the
    names passed to ``--query-gpu``) when the output has no header. Units are stripped from
    values, every placeholder ("[N/A]", "[Not Supported]", ...) becomes None.

    >>> parse_nvidia_smi_csv("name, fan.speed [%]\\nTesla T4, [N/A]\\n")
    [{'name': 'Tesla T4', 'fan.speed': None}]
    >>> parse_nvidia_smi_csv("2004, 44 %", fields=["memory.total", "utilization.gpu"])
    [{'memory.total': '2004', 'utilization.gpu': '44'}]
    """
    # skipinitialspace: nvidia-smi separates with ", "; names never contain commas.
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    if not rows:
        return []

    if fields is not None:
        columns = [_split_header(name) for name in fields]
        data = rows
        # Accept the header anyway if the caller passed fields but the output has one.
        if [_split_header(cell)[0] for cell in rows[0]] == [key for key, _ in columns]:
            columns = [_split_header(cell) for cell in rows[0]]
            data = rows[1:]
    else:
        columns = [_split_header(cell) for cell in rows[0]]
        data = rows[1:]
        if any(_clean_value(cell, None) != cell.strip() for cell in rows[0]) or any(
            key and key[0].isdigit() for key, _ in columns
        ):
            raise NvidiaSmiParseError(
                "nvidia-smi CSV has no header line (was it run with --format=csv,noheader?); "
                "pass fields=[...] with the names given to --query-gpu"
            )

    result: list[dict[str, str | None]] = []
    for number, row in enumerate(data, start=1):
        if len(row) != len(columns):
            raise NvidiaSmiParseError(
                f"nvidia-smi CSV row {number} has {len(row)} values but {len(columns)} columns "
                f"were expected ({', '.join(key for key, _ in columns)}): {', '.join(row)!r}; "
                "check that fields matches the --query-gpu list"
            )
        result.append(
            {key: _clean_value(raw, unit) for (key, unit), raw in zip_strict(columns, row)}
        )
    return result


# --- XML (nvidia-smi -q -x) -------------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaSmiGpu:
    """One ``<gpu>`` of ``nvidia-smi -q -x``, reduced to what health checks and drift need."""

    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    memory_total_mib: int | None
    persistence_mode: bool | None
    mig_mode: str | None  # "Enabled", "Disabled", None where MIG is not supported
    ecc_uncorrected_volatile: int | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    clock_event_reasons_active: list[str] = field(default_factory=list)  # ["gpu_idle"]
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    # The device's own maximum link (R470+; the max_link_* above is capped by the slot).
    pcie_gen_device_max: int | None = None
    pcie_width_device_max: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    applications_clock_mhz: int | None = None
    default_applications_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class NvidiaSmiLog:
    """The whole ``nvidia-smi -q -x`` document."""

    driver_version: str | None
    cuda_version: str | None
    gpus: list[NvidiaSmiGpu]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _text(element: ET.Element | None, path: str) -> str | None:
    """Stripped text at ``path`` below ``element``; None when missing, empty or a placeholder."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or _is_placeholder(value):
        return None
    return value


def _number(value: str | None) -> float | None:
    """The leading number of "67.03 W", "27 C", "81920 MiB", "16x"; None when there is none."""
    if value is None:
        return None
    match = re.match(r"-?\d+(?:\.\d+)?", value)
    return float(match.group()) if match else None


def _integer(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("yes", "enabled", "active"):
        return True
    if lowered in ("no", "disabled", "not active"):
        return False
    return None


def _ecc_uncorrected_volatile(gpu: ET.Element) -> int | None:
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    # Drivers before ~R450: <double_bit> per memory type with a <total>.
    double_bit = volatile.find("double_bit")
    if double_bit is not None:
        total = _integer(_text(double_bit, "total"))
        if total is not None:
            return total
        counts = [_integer(_text(child, ".")) for child in double_bit]
        numbers = [count for count in counts if count is not None]
        return sum(numbers) if numbers else None
    # Newer drivers: dram_uncorrectable plus sram_uncorrectable (or its _parity/_secded
    # halves from R570 on). Sum every uncorrectable counter that holds a number.
    counts = [_integer(_text(child, ".")) for child in volatile if "uncorrectable" in child.tag]
    numbers = [count for count in counts if count is not None]
    return sum(numbers) if numbers else None


def _clock_event_reasons_active(gpu: ET.Element) -> list[str]:
    # R535 renamed clocks_throttle_reasons/clocks_throttle_reason_* to clocks_event_*.
    for block, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        reasons = gpu.find(block)
        if reasons is not None:
            return [
                child.tag.removeprefix(prefix)
                for child in reasons
                if child.tag.startswith(prefix) and (child.text or "").strip().lower() == "active"
            ]
    return []


def _power_draw_w(gpu: ET.Element) -> float | None:
    # R530+ moved power_readings to gpu_power_readings; R555+ split power_draw into
    # instant_power_draw and average_power_draw. Prefer the instantaneous reading.
    for path in (
        "gpu_power_readings/instant_power_draw",
        "gpu_power_readings/power_draw",
        "power_readings/instant_power_draw",
        "power_readings/power_draw",
        "gpu_power_readings/average_power_draw",
        "power_readings/average_power_draw",
    ):
        value = _number(_text(gpu, path))
        if value is not None:
            return value
    return None


def _parse_gpu(gpu: ET.Element) -> NvidiaSmiGpu:
    link = "pci/pci_gpu_link_info"
    remapped = gpu.find("remapped_rows")
    pages, pending = counters.retired_pages(gpu)
    enforced, default = counters.power_limits(gpu)
    return NvidiaSmiGpu(
        name=_text(gpu, "product_name"),
        uuid=_text(gpu, "uuid"),
        pci_bus_id=_text(gpu, "pci/pci_bus_id") or gpu.get("id"),
        # Direct children only: every <mig_device> carries its own fb_memory_usage.
        memory_total_mib=_integer(_text(gpu, "fb_memory_usage/total")),
        persistence_mode=_yes_no(_text(gpu, "persistence_mode")),
        mig_mode=_text(gpu, "mig_mode/current_mig"),
        ecc_uncorrected_volatile=_ecc_uncorrected_volatile(gpu),
        remapped_rows_pending=_yes_no(_text(remapped, "remapped_row_pending")),
        remapped_rows_failure=_yes_no(_text(remapped, "remapped_row_failure")),
        clock_event_reasons_active=_clock_event_reasons_active(gpu),
        pcie_gen_current=_integer(_text(gpu, f"{link}/pcie_gen/current_link_gen")),
        pcie_gen_max=_integer(_text(gpu, f"{link}/pcie_gen/max_link_gen")),
        pcie_width_current=_integer(_text(gpu, f"{link}/link_widths/current_link_width")),
        pcie_width_max=_integer(_text(gpu, f"{link}/link_widths/max_link_width")),
        temperature_c=_number(_text(gpu, "temperature/gpu_temp")),
        power_draw_w=_power_draw_w(gpu),
        pcie_gen_device_max=_integer(_text(gpu, f"{link}/pcie_gen/max_device_link_gen")),
        pcie_width_device_max=_integer(_text(gpu, f"{link}/link_widths/max_device_link_width")),
        ecc_uncorrected_aggregate=counters.ecc_count(gpu, "aggregate", "uncorrectable"),
        ecc_corrected_volatile=counters.ecc_count(gpu, "volatile", "correctable"),
        ecc_corrected_aggregate=counters.ecc_count(gpu, "aggregate", "correctable"),
        retired_pages=pages,
        retired_pages_pending=pending,
        power_limit_w=enforced,
        default_power_limit_w=default,
        **counters.clocks(gpu),
    )


def parse_nvidia_smi_xml(text: str) -> NvidiaSmiLog:
    """The driver, CUDA version and per-GPU health fields of ``nvidia-smi -q -x``.

    Handles both schema generations (throttle vs. event reasons, double_bit vs. dram ECC
    counters, power_readings vs. gpu_power_readings); any missing or "N/A" element is None.

    >>> log = parse_nvidia_smi_xml("<nvidia_smi_log><driver_version>550.54.15</driver_version>"
    ...     "<gpu><product_name>NVIDIA H100</product_name></gpu></nvidia_smi_log>")
    >>> log.driver_version, log.gpus[0].name
    ('550.54.15', 'NVIDIA H100')
    """
    # The input is the host's own tool output, but refuse entity declarations anyway so a
    # pasted file can never expand into something huge.
    if "<!ENTITY" in text:
        raise NvidiaSmiParseError(
            "nvidia-smi XML must not declare entities; "
            "pass the unmodified `nvidia-smi -q -x` output"
        )
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        first_line = text.strip().splitlines()[0] if text.strip() else "<empty>"
        raise NvidiaSmiParseError(
            f"not `nvidia-smi -q -x` XML ({exc}); the text starts with {first_line[:80]!r}. "
            "If nvidia-smi printed an error instead, run `gpufleet diagnose` on it"
        ) from exc
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError(
            f"expected an <nvidia_smi_log> document from `nvidia-smi -q -x`, got <{root.tag}>"
        )
    return NvidiaSmiLog(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        gpus=[_parse_gpu(gpu) for gpu in root.findall("gpu")],
    )
