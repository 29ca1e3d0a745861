"""One dotted name per judged figure: its unit, inventory key, Prometheus family and old names.

The canonical name is the floor's (gpufleet.floors.derived, ``gpufleet thresholds``); the
report (gpufleet.report.figures ``Figure.name``), the Prometheus ``figure`` label and
``thresholds --judge`` resolve every old spelling through ``ALIASES`` to it. Standard library
only: the report and the textfile writer import it on the GPU hosts.

Example:
    >>> canonical("gemm", "fp16_fraction_of_peak")
    'gemm.fraction_of_peak.fp16'
    >>> NAMES["xla.speedup.amp"].inventory_key, NAMES["xla.speedup.amp"].prometheus
    ('xla_speedup_min', 'gpufleet_speedup_ratio')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpufleet.floors.floor_types import Floor

FIGURE = "gpufleet_workload_figure"  # every headline figure, in its own unit
SPEEDUP = "gpufleet_speedup_ratio"
SCALING = "gpufleet_scaling_efficiency_ratio"
RENAMED_TO = {  # gpufleet.report.metric_units.RENAMED's base-unit names of the judged figures
    "nccl": "gpufleet_nccl_busbw_bytes_per_second",
    "cluster_nccl": "gpufleet_cluster_nccl_busbw_bytes_per_second",
    "link": "gpufleet_cluster_link_bits_per_second",
}


@dataclass(frozen=True)
class FigureName:
    """A judged figure: canonical dotted name, unit, and the names other surfaces knew it by.

    ``inventory_key``: the key of the inventory's ``thresholds`` that sets this floor (None:
    only the published floors and calibration do). ``prometheus``: the family the textfile
    writes it to, with a ``figure`` label of the canonical name (None: not written).
    ``aliases``: old names (report keys ``workload/metric``, bare workload metric names).
    """

    name: str
    unit: str
    prometheus: str | None = None
    prometheus_unit: str = ""
    inventory_key: str | None = None
    aliases: tuple[str, ...] = ()
    # The thresholds.toml key the workload judges the figure against itself (its default, or
    # the inventory's value), where no gpufleet.floors floor exists or as that floor's fallback.
    threshold_key: str | None = None
    legacy: bool = False  # written by an older gpufleet only: kept results and baselines


def _entries() -> Iterable[FigureName]:
    for p in ("fp32", "tf32", "amp"):
        for w, what in (("resnet50", "images_per_s"), ("bert_large", "sequences_per_s")):
            name = f"{w}.{what}.{p}"
            unit = what.replace("_per_s", "/s")
            yield FigureName(name, unit, FIGURE, unit, aliases=(f"{w}/{name}",))
        name = f"xla.speedup.{p}"
        yield FigureName(name, "x", SPEEDUP, "ratio", "xla_speedup_min", (f"xla/{name}",))
    for p, policy in (("fp16", "mixed_float16"), ("bf16", "mixed_bfloat16")):
        name = f"mixed_precision.speedup.{p}"
        old: tuple[str, ...] = (f"mixed_precision/{name}", f"mixed_precision/{policy}_speedup")
        yield FigureName(name, "x", SPEEDUP, "ratio", f"mixed_precision_{p}_speedup_min", old)
    for p in ("fp32", "tf32", "fp16", "bf16"):
        for what, unit in (("fraction_of_peak", "fraction"), ("tflops", "TFLOP/s")):
            old = (f"gemm/{p}_{what}", f"gemm.{p}_{what}", f"{what}.{p}")
            key = f"gemm_{p}_fraction_min" if what == "fraction_of_peak" else None
            yield FigureName(f"gemm.{what}.{p}", unit, FIGURE, unit, aliases=old, threshold_key=key)
    yield FigureName(
        "mirrored.scaling_efficiency",
        "fraction",
        SCALING,
        "ratio",
        "mirrored_scaling_efficiency_min",
        ("mirrored/scaling_efficiency",),
    )
    old = ("scaling_efficiency.xla", "mirrored/scaling_efficiency.xla")  # judged as the above
    yield FigureName("mirrored.scaling_efficiency.xla", "fraction", SCALING, "ratio", aliases=old)
    yield FigureName("mirrored.gpu_utilization_pct", "%")
    yield FigureName("mirrored.gpu_utilization_spread_pct", "%")
    old = ("allreduce/busbw_gbps_largest", "allreduce.busbw_gbps_largest")
    yield FigureName(
        "allreduce.busbw_gbps", "GB/s", FIGURE, "GB/s", "allreduce_busbw_min_gbps", old
    )
    for name in ("input_pipeline.device_busy_fraction", "allreduce.busbw_fraction_of_nccl_tests"):
        old = (name.replace(".", "/", 1),)
        yield FigureName(name, "fraction", FIGURE, "fraction", aliases=old)
    # Judged against a thresholds.toml key (no gpufleet.floors floor): the input pipeline's.
    name, key = "input_pipeline.tuned_speedup_vs_naive", "input_pipeline_tuned_speedup_min"
    old = ("input_pipeline/tuned_speedup_vs_naive",)
    yield FigureName(name, "x", SPEEDUP, "ratio", aliases=old, threshold_key=key)
    name, key = "input_pipeline.tuned_gpu_utilization_mean", "input_pipeline_gpu_utilization_min"
    old = ("input_pipeline/tuned_gpu_utilization_mean",)
    yield FigureName(name, "%", FIGURE, "%", aliases=old, threshold_key=key)
    # An older gpufleet's figures, still in kept results and baselines (other measurements than
    # today's, so never aliases of them): XLA's MLP step, mirrored's N-GPU throughput ratio.
    yield FigureName("xla.speedup", "x", SPEEDUP, "ratio", aliases=("xla/speedup",), legacy=True)
    old = ("mirrored/throughput_ratio",)
    yield FigureName("mirrored.throughput_ratio", "x", SPEEDUP, "ratio", aliases=old, legacy=True)
    # The vendor and cluster figures (nccl-tests, iperf3), each judged against its own floor
    # (gpufleet.floors.nccl, gpufleet.floors.nccl_cluster, the declared interconnect_gbps);
    # their textfile names are in base units, the old ones aliases (metric_units.RENAMED).
    old = ("gpufleet_nccl_busbw_gbps", "busbw_at_largest_gbps")
    bps = "bytes/s"
    yield FigureName("nccl_tests.busbw", "GB/s", RENAMED_TO["nccl"], bps, aliases=old)
    old = ("gpufleet_cluster_nccl_busbw_gbps", "max_busbw_gbps")
    yield FigureName("cluster.nccl_busbw", "GB/s", RENAMED_TO["cluster_nccl"], bps, aliases=old)
    old = ("gpufleet_cluster_link_gbps",)
    yield FigureName("cluster.link_throughput", "Gbit/s", RENAMED_TO["link"], "bits/s", aliases=old)
    yield FigureName("pcie.link_gen", "generation")
    yield FigureName("pcie.link_width", "lanes")


NAMES: dict[str, FigureName] = {e.name: e for e in _entries()}
ALIASES: dict[str, str] = {a: e.name for e in NAMES.values() for a in e.aliases}
# The floors the workloads judge (run.floor; tests/unit/test_figure_names_written.py holds the
# list to the workload sources): an inventory's thresholds may set each by its dotted name.
_JUDGED: tuple[str, ...] = ("resnet50.images_per_s.", "bert_large.sequences_per_s.")
_JUDGED += ("mixed_precision.speedup.",)
_JUDGED += ("xla.speedup.", "gemm.fraction_of_peak.", "mirrored.scaling_efficiency")
_JUDGED += ("mirrored.gpu_utilization_", "allreduce.", "input_pipeline.device_busy_fraction")
JUDGED_FLOORS: frozenset[str] = frozenset(
    e.name
    for e in NAMES.values()
    if e.name.startswith(_JUDGED) and not e.legacy and not e.name.endswith(".xla")
)  # (mirrored.scaling_efficiency.xla is judged against the plain arm's floor)
# The dotted names an inventory's thresholds may hold: those floors, and the figures judged
# against a thresholds.toml key (input_pipeline_tuned_speedup_min), which they stand for.
SETTABLE: frozenset[str] = JUDGED_FLOORS | {e.name for e in NAMES.values() if e.threshold_key}


def canonical(workload: str, metric: str) -> str | None:
    """The canonical name of a workload's metric (its own, prefixed, or an old one), or None."""
    for candidate in (metric, f"{workload}.{metric}", f"{workload}/{metric}"):
        if candidate in NAMES:
            return candidate
        if candidate in ALIASES:
            return ALIASES[candidate]
    return None


def dotted(workload: str, metric: str) -> str:
    """The one name of a workload's metric: its registry name, else ``<workload>.<metric>``
    (an undotted metric) or the metric itself, as ``thresholds --judge`` and calibration name
    the figures of a results document.

    Example:
        >>> dotted("gemm", "fp16_tflops"), dotted("memory_growth", "free_fraction")
        ('gemm.tflops.fp16', 'memory_growth.free_fraction')
    """
    own = metric if "." in metric or not workload else f"{workload}.{metric}"
    return canonical(workload, metric) or resolve(own)


def name_of_key(key: str) -> str:
    """The canonical name of a report key ``WORKLOAD/METRIC``; else the key itself."""
    workload, _, metric = key.partition("/")
    return (canonical(workload, metric) if metric else None) or key


def resolve(name: str) -> str:
    """``name`` as its canonical spelling where it is an old one; else unchanged."""
    return ALIASES.get(name, name)


def apply_overrides(floors: Iterable[Floor], overrides: Mapping[str, Any]) -> list[Floor]:
    """The floors with the inventory's ``thresholds`` applied: a judged floor's dotted name
    (``xla.speedup.amp``, JUDGED_FLOORS) sets that floor, an inventory key the floors it sets
    (``xla_speedup_min`` -> ``xla.speedup.*``), the name first; 0 or unset leaves a floor be.

    Example:
        >>> [f.value for f in apply_overrides([], {"xla_speedup_min": 1.2})][:1]
        [1.2]
    """
    out = {f.name: f for f in floors}
    families = {n.rsplit(".", 1)[0] for n in out}
    for entry in NAMES.values():
        # The figure's own dotted name first (thresholds = {"xla.speedup.amp": 1.2}), then
        # the key that sets the floors of several (xla_speedup_min).
        given = entry.name if entry.name in JUDGED_FLOORS and entry.name in overrides else None
        given = given or entry.inventory_key or ""
        value = overrides.get(given)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value:
            continue
        origin = f"inventory override: thresholds {given} = {value:g}"
        found = out.get(entry.name)
        if found is not None:
            out[entry.name] = replace(
                found, value=float(value), origin=origin, figure="", source=""
            )
        elif entry.name.rsplit(".", 1)[0] not in families:
            # No floor of this family at all (a model gpufleet has no figures for): the
            # override is the floor; where the family exists, its precisions are the host's.
            out[entry.name] = Floor(entry.name, float(value), entry.unit, origin)
    return list(out.values())


def threshold_key(name: str) -> str | None:
    """The thresholds.toml key a figure's dotted name stands for in the inventory's
    ``thresholds``: its own key, or the inventory key that sets this floor alone
    (``allreduce.busbw_gbps`` -> ``allreduce_busbw_min_gbps``); None where it sets a floor
    by its name only (``xla.speedup.amp``: ``xla_speedup_min`` sets the three XLA floors)."""
    entry = NAMES.get(name)
    if entry is None or name not in SETTABLE:
        return None
    if entry.threshold_key:
        return entry.threshold_key
    key = entry.inventory_key
    return key if key and set_by(key) == [name] else None


def set_by(key: str) -> list[str]:
    """The figures whose floor the threshold key ``key`` sets (empty for most keys)."""
    return sorted(e.name for e in NAMES.values() if e.inventory_key == key)
