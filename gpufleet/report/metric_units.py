"""Prometheus base units: figures in bits or bytes per second and seconds; old names kept."""

from __future__ import annotations

# Old name -> (name in Prometheus base units, factor from the old unit). The old names stay,
# as aliases, for one release: their HELP says which name replaces them.
RENAMED: dict[str, tuple[str, float]] = {
    "gpufleet_cluster_link_gbps": ("gpufleet_cluster_link_bits_per_second", 1e9),  # Gbit/s
    "gpufleet_cluster_link_latency_ms": ("gpufleet_cluster_link_latency_seconds", 1e-3),
    "gpufleet_cluster_nccl_busbw_gbps": ("gpufleet_cluster_nccl_busbw_bytes_per_second", 1e9),
    "gpufleet_nccl_busbw_gbps": ("gpufleet_nccl_busbw_bytes_per_second", 1e9),  # GB/s
    "gpufleet_nccl_avg_busbw_gbps": ("gpufleet_nccl_avg_busbw_bytes_per_second", 1e9),
    "gpufleet_nccl_busbw_floor_gbps": ("gpufleet_nccl_busbw_floor_bytes_per_second", 1e9),
}
# Suffixes a gpufleet metric name may end in: a base unit, or a count, state or flag.
UNIT_SUFFIXES = (
    "_seconds",
    "_bytes_per_second",
    "_bits_per_second",
    "_ratio",
    "_celsius",
    "_watts",
    "_bytes",
    "_total",
)
UNITLESS_SUFFIXES = (
    "_info",
    "_status",
    "_result",
    "_verdict",
    "_state",
    "_success",
    "_error",
    "_unproven",
    "_ok",
    "_passed",
    "_regressed",
    "_count",
    "_runs",
    "_tests",
    "_findings",
    "_hosts",
    "_level",
    "_wrong",
    "_culprit",
    "_throttled",
    "_active",
    "_pending",
    "_failure",
    "_errors",
    "_cusum",
    "_checks",
    "_figure",
    "_threshold",
)


def base_unit_help(old: str, help_text: str) -> str:
    """The HELP of the base-unit twin: the old text, then the unit its values are in."""
    new = RENAMED[old][0]
    unit = "seconds" if new.endswith("_seconds") else new.rsplit("_", 3)[-3] + " per second"
    return f"{help_text} Here in {unit} (the figure of {old} x {RENAMED[old][1]:g})."


def deprecated_help(old: str, help_text: str) -> str:
    """The HELP of an old name kept as an alias."""
    return f"{help_text} Deprecated alias of {RENAMED[old][0]}; removed after one release."


def base_unit_problem(name: str) -> str:
    """Why a metric name breaks the convention ('' when it keeps it)."""
    if name in RENAMED:
        return ""  # an alias, written beside its base-unit twin
    if name.endswith(("_gbps", "_ms", "_mib", "_gib")):
        return f"{name}: not a Prometheus base unit (bits/bytes per second, seconds, bytes)"
    if not name.endswith(UNIT_SUFFIXES + UNITLESS_SUFFIXES):
        return f"{name}: ends in no known unit or kind ({', '.join(UNIT_SUFFIXES)}, ...)"
    return ""
