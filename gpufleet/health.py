"""GPU health verdicts from a parsed `nvidia-smi -q -x` report (pure functions, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpufleet import health_ecc, health_limits
from gpufleet.floors.datasheets import expected_gpu_count
from gpufleet.health_base import Finding, field_of, gpus_of, label

__all__ = ["Finding", "field_of", "gpus_of", "label"]

# Clock event reasons (nvidia-smi -q, "Clocks Event Reasons"; NVML nvmlClocksEventReasons).
# Under load, idle (0x1) and the slowdowns (0x8 hardware, 0x20/0x40 thermal, 0x80 power brake)
# fail the GPU, and so does any reason not listed below (a newer driver's name included).
# Reasons that are configuration or normal operation rather than a fault: application
# clocks set by the admin (0x2), the software power cap that a GPU running flat out routinely
# reaches (0x4), sync boost (0x10) and display clocks (0x100). They are reported as findings of
# severity "info" so that they show in the results without failing the GPU.
BENIGN_REASONS = frozenset(
    {
        "applications_clocks_setting",
        "sw_power_cap",
        "sync_boost",
        "display_clocks_setting",
    }
)

_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_", "clocks_event_reasons_")

CHECKS = (
    "gpu_count",
    "ecc",
    "ecc_lifetime",
    "row_remap",
    "power_clocks",
    "clock_event_reasons",
    "pcie_link",
    "pcie_datasheet",
)


def reason_name(raw: str) -> str:
    """``clocks_event_reason_hw_slowdown`` (or ``clocks_throttle_reason_…``) -> ``hw_slowdown``."""
    name = raw.strip().lower()
    for prefix in _REASON_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def check_gpu_count(smi: Any, expected: int | None, nvswitches: int = 0) -> list[Finding]:
    """A fail finding when nvidia-smi sees a different number of GPUs than expected.

    Without an expected count, the board gives one (review 2 N13): NVSwitch on the PCI bus
    means 8 GPUs, and SXM parts come 1, 2, 4, 8 or 16 to a host, so 7 of 8 fails even when
    the lost GPU has left the PCI bus too (gpufleet.floors.datasheets)."""
    gpus = gpus_of(smi)
    seen = len(gpus)
    source = "the inventory's gpu count"
    if expected is None:
        names = {field_of(g, "name") for g in gpus}
        model = next(iter(names)) if len(names) == 1 else None
        expected = expected_gpu_count(model, seen, nvswitches)
        source = "the board (NVSwitch on the bus, or an SXM part's board sizes)"
    if expected is None:
        return []
    if seen != expected:
        return [
            Finding(
                "gpu_count",
                "fail",
                f"nvidia-smi sees {seen} GPU(s), expected {expected} from {source}: a GPU fell "
                "off the bus, or the count is wrong (set gpu_count in the inventory)",
                figures={"seen": seen, "expected": expected},
            )
        ]
    return []


def check_ecc(smi: Any) -> list[Finding]:
    """Any uncorrectable volatile ECC error fails the GPU (NVIDIA: drain and reset it)."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        count = field_of(gpu, "ecc_uncorrected_volatile")
        if count is not None and int(count) > 0:
            findings.append(
                Finding(
                    "ecc",
                    "fail",
                    f"{label(index, gpu)}: {count} uncorrectable volatile ECC error(s) since "
                    "the last driver load; drain the GPU and reset it (nvidia-smi -r)",
                    gpu=str(index),
                    figures={"ecc_uncorrected_volatile": int(count)},
                )
            )
    return findings


def check_row_remap(smi: Any) -> list[Finding]:
    """A pending row remap (needs a GPU reset) or a remap failure (RMA) fails the GPU."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        if field_of(gpu, "remapped_rows_failure"):
            findings.append(
                Finding(
                    "row_remap",
                    "fail",
                    f"{label(index, gpu)}: row remapping failed; the GPU has run out of spare "
                    "rows and should be replaced",
                    gpu=str(index),
                    figures={"remapped_rows_failure": True},
                )
            )
        if field_of(gpu, "remapped_rows_pending"):
            findings.append(
                Finding(
                    "row_remap",
                    "fail",
                    f"{label(index, gpu)}: a row remap is pending; reset the GPU (or reboot) "
                    "to apply it",
                    gpu=str(index),
                    figures={"remapped_rows_pending": True},
                )
            )
    return findings


def check_clock_event_reasons(smi: Any) -> list[Finding]:
    """Under load, a throttling reason or idle (0x1) fails the GPU; benign ones are info."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        active = sorted({reason_name(r) for r in field_of(gpu, "clock_event_reasons_active") or ()})
        bad = [r for r in active if r not in BENIGN_REASONS]
        if "gpu_idle" in active:
            # Idle in a sample taken under load: the load never reached this GPU, so its
            # clock and PCIe figures say nothing about how it runs busy.
            findings.append(
                Finding(
                    "clock_event_reasons",
                    "fail",
                    f"{label(index, gpu)}: idle while the load ran (clock event reason "
                    "gpu_idle); the load did not reach this GPU",
                    gpu=str(index),
                    figures={"active": active},
                )
            )
        elif bad:
            findings.append(
                Finding(
                    "clock_event_reasons",
                    "fail",
                    f"{label(index, gpu)}: clocks slowed under load by {', '.join(bad)}; check "
                    "cooling, power supply and `nvidia-smi -q -d PERFORMANCE`",
                    gpu=str(index),
                    figures={"active": active},
                )
            )
        elif active:
            findings.append(
                Finding(
                    "clock_event_reasons",
                    "info",
                    f"{label(index, gpu)}: active clock event reasons: {', '.join(active)}",
                    gpu=str(index),
                    figures={"active": active},
                )
            )
    return findings


def check_pcie_link(smi: Any) -> list[Finding]:
    """Under load, a PCIe link below the card's maximum generation or width fails the GPU."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        figures = {
            key: field_of(gpu, key)
            for key in ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")
        }
        short = []
        if None not in (figures["pcie_gen_current"], figures["pcie_gen_max"]) and int(
            figures["pcie_gen_current"]
        ) < int(figures["pcie_gen_max"]):
            short.append(f"gen {figures['pcie_gen_current']} of {figures['pcie_gen_max']}")
        if None not in (figures["pcie_width_current"], figures["pcie_width_max"]) and int(
            figures["pcie_width_current"]
        ) < int(figures["pcie_width_max"]):
            short.append(f"x{figures['pcie_width_current']} of x{figures['pcie_width_max']}")
        if short:
            findings.append(
                Finding(
                    "pcie_link",
                    "fail",
                    f"{label(index, gpu)}: PCIe link under load runs at {' and '.join(short)}; "
                    "reseat the card or check the slot and riser",
                    gpu=str(index),
                    figures=figures,
                )
            )
    return findings


def evaluate_idle(
    smi: Any, expected_gpu_count: int | None = None, nvswitches: int = 0
) -> list[Finding]:
    """The checks that hold at any time: GPU count, ECC (volatile and lifetime), row
    remapping, power limits and clocks against their defaults and the datasheet."""
    return [
        *check_gpu_count(smi, expected_gpu_count, nvswitches),
        *check_ecc(smi),
        *health_ecc.check_ecc_lifetime(smi),
        *check_row_remap(smi),
        *health_limits.check_power_and_clocks(smi),
    ]


def evaluate_under_load(smi: Any) -> list[Finding]:
    """The checks that only mean something while the GPUs are busy: clocks and PCIe link
    (against the link's maximum and against the datasheet)."""
    return [
        *check_clock_event_reasons(smi),
        *check_pcie_link(smi),
        *health_limits.check_pcie_datasheet(smi),
    ]


def evaluate(
    idle: Any, under_load: Any | None = None, *, expected_gpu_count: int | None = None
) -> list[Finding]:
    """All health findings from an idle report and, when given, one taken under load.

    Example: ``[f for f in evaluate(parsed, expected_gpu_count=8) if f.severity == "fail"]``
    """
    findings = evaluate_idle(idle, expected_gpu_count)
    if under_load is not None:
        findings += evaluate_under_load(under_load)
    return findings


def failures(findings: Iterable[Finding], check: str | None = None) -> list[Finding]:
    """The findings of severity "fail", optionally only those of one check."""
    return [f for f in findings if f.severity == "fail" and check in (None, f.check)]


def gpu_summary(smi: Any) -> list[dict[str, Any]]:
    """A small per-GPU table for the results JSON (the figures a person reads first)."""
    keys: Sequence[str] = (
        "name",
        "uuid",
        "pci_bus_id",
        "memory_total_mib",
        "persistence_mode",
        "ecc_uncorrected_volatile",
        "remapped_rows_pending",
        "remapped_rows_failure",
        "clock_event_reasons_active",
        "pcie_gen_current",
        "pcie_gen_max",
        "pcie_width_current",
        "pcie_width_max",
        "temperature_c",
        "power_draw_w",
        "ecc_uncorrected_aggregate",
        "retired_pages",
        "retired_pages_pending",
        "power_limit_w",
        "default_power_limit_w",
        "applications_clock_mhz",
        "max_sm_clock_mhz",
    )
    return [{key: field_of(gpu, key) for key in keys} for gpu in gpus_of(smi)]
