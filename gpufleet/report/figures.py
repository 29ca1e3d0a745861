"""The headline figures of a results document: speed-ups, scaling, throughput, with thresholds.

Pure functions over plain data (no I/O, standard library only): the Prometheus textfile, the
baseline comparison and the HTML report all read figures through here, so they agree on what a
figure is called and on which side of its threshold is good.

Example:
    >>> doc = {"workloads": [{"workload": "xla", "metrics": {"speedup": 1.31},
    ...                       "config": {"thresholds": {"xla_speedup_min": 1.1}}}]}
    >>> [(f.key, f.value, f.threshold) for f in figures_of(doc)]
    [('xla/speedup', 1.31, 1.1)]
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.floors.names import canonical

# Figure kinds and the unit a person reads them in.
KIND_UNITS = {
    "speedup": "x",
    "scaling_efficiency": "",
    "throughput": "TFLOPS",
    "fraction_of_peak": "",
    "bandwidth": "GB/s",
    "slowdown": "",
    "utilization": "%",
    "images_per_s": "images/s",
    "sequences_per_s": "sequences/s",
    "fraction": "",
}


@dataclass(frozen=True)
class Rule:
    """How one workload metric becomes a figure: its kind, variant and threshold key."""

    pattern: str  # regular expression over the metric name, full match
    kind: str
    variant: str  # a constant, or "{1}" for the pattern's first group
    threshold_key: str | None = None  # may use "{1}" too
    higher_is_better: bool = True
    check: str | None = None  # the workload check judging it, when not named as the metric
    # False for a figure that restates another one's measurement (TFLOPS beside fraction of
    # peak): regressions compare each measurement once.
    compared: bool = True
    floor: str | None = None  # the floor judging it, when not the figure's own dotted name


# Per workload; metrics that match no rule (losses, errors, CI bounds) are not headline figures.
# A figure's threshold is the floor the workload recorded in config["floors"] under the figure's
# dotted name (gpufleet.floors.names), else the thresholds.toml key of its rule (older documents,
# and figures judged against a key: validation/verdicts/thresholds.toml).
_PRECISION = r"(fp32|tf32|fp16|bf16|amp)"
RULES: dict[str, tuple[Rule, ...]] = {
    "resnet50": (
        Rule(
            rf"resnet50\.images_per_s\.{_PRECISION}", "images_per_s", "{1}", check="throughput_{1}"
        ),
    ),
    "bert_large": (
        Rule(
            rf"bert_large\.sequences_per_s\.{_PRECISION}",
            "sequences_per_s",
            "{1}",
            check="throughput_{1}",
        ),
    ),
    "mirrored": (
        Rule(
            "scaling_efficiency",
            "scaling_efficiency",
            "all_gpus",
            "mirrored_scaling_efficiency_min",
        ),
        Rule(
            r"scaling_efficiency\.xla",
            "scaling_efficiency",
            "all_gpus_xla",
            check="scaling_efficiency_xla",
            floor="mirrored.scaling_efficiency",
        ),
        Rule(
            "throughput_ratio",
            "speedup",
            "all_gpus",
            check="scaling_efficiency",
            compared=False,
        ),
    ),
    "mixed_precision": (
        Rule(r"mixed_precision\.speedup\.fp16", "speedup", "fp16", check="mixed_float16_speedup"),
        Rule(r"mixed_precision\.speedup\.bf16", "speedup", "bf16", check="mixed_bfloat16_speedup"),
        Rule(
            "mixed_float16_speedup", "speedup", "mixed_float16", "mixed_precision_fp16_speedup_min"
        ),
        Rule(
            "mixed_bfloat16_speedup",
            "speedup",
            "mixed_bfloat16",
            "mixed_precision_bf16_speedup_min",
        ),
    ),
    "xla": (
        Rule(rf"xla\.speedup\.{_PRECISION}", "speedup", "jit_compile_{1}", check="xla_speedup_{1}"),
        Rule("speedup", "speedup", "jit_compile", "xla_speedup_min"),
    ),
    "gemm": (
        Rule(
            r"(fp32|tf32|fp16|bf16)_tflops",
            "throughput",
            "{1}",
            check="{1}_fraction_of_peak",
            compared=False,
        ),
        Rule(
            r"(fp32|tf32|fp16|bf16)_fraction_of_peak",
            "fraction_of_peak",
            "{1}",
            "gemm_{1}_fraction_min",
        ),
    ),
    "allreduce": (
        Rule(
            "busbw_gbps_largest",
            "bandwidth",
            "largest",
            "allreduce_busbw_min_gbps",
            check="busbw_floor",
        ),
        Rule("busbw_fraction_of_nccl_tests", "fraction", "nccl_tests", check="busbw_vs_nccl_tests"),
    ),
    "input_pipeline": (
        Rule("tuned_slowdown", "slowdown", "tuned", "input_pipeline_max_slowdown", False),
        Rule(
            "tuned_gpu_utilization_mean",
            "utilization",
            "tuned",
            "input_pipeline_gpu_utilization_min",
            check="gpu_busy_tuned",
        ),
        Rule("device_busy_fraction", "fraction", "tuned", check="tuned_keeps_device_busy"),
        Rule(
            "tuned_speedup_vs_naive",
            "speedup",
            "tuned_vs_naive",
            "input_pipeline_tuned_speedup_min",
            check="tuned_faster_than_naive",
        ),
    ),
}
# Any other workload's "<variant>_speedup" / "speedup" is a speed-up too.
GENERIC = (Rule(r"(?:(.+)_)?speedup", "speedup", "{1}"),)


@dataclass(frozen=True)
class Figure:
    """One headline figure of one workload run.

    ``threshold`` is None when none is set (absent, or 0, which thresholds.toml uses for
    "not asserted"); ``ci`` is the confidence interval when the workload reported one.
    """

    workload: str
    metric: str
    kind: str
    variant: str
    value: float
    threshold: float | None
    higher_is_better: bool
    ci: tuple[float, float] | None = None
    # The status of the workload's check that judged this figure ("not_applicable" on a
    # host without a GPU, where the figure is measured but means nothing), or None.
    status: str | None = None
    compared: bool = True  # False: restates another figure's measurement (Rule.compared)

    @property
    def key(self) -> str:
        """Stable name across runs: ``mixed_precision/mixed_float16_speedup``."""
        return f"{self.workload}/{self.metric}"

    @property
    def name(self) -> str:
        """The figure's one dotted name (gpufleet.floors.names), the one ``gpufleet thresholds``
        and the Prometheus ``figure`` label use: ``xla.speedup.amp``; else ``key``."""
        return canonical(self.workload, self.metric) or self.key

    @property
    def unit(self) -> str:
        return KIND_UNITS.get(self.kind, "")

    @property
    def applicable(self) -> bool:
        """False when the workload said its speed verdict does not apply (no GPU)."""
        return self.status != "not_applicable"

    @property
    def meets_threshold(self) -> bool | None:
        """Whether the value is on the good side of its threshold (None: no threshold)."""
        if self.threshold is None:
            return None
        if self.higher_is_better:
            return self.value >= self.threshold
        return self.value <= self.threshold


def number(value: Any) -> float | None:
    """A finite float, or None for anything else (bools, strings, NaN, missing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _fill(template: str, match: re.Match[str]) -> str:
    group = match.group(1) if match.re.groups else None
    return template.replace("{1}", group or "")


def _ci(metrics: Mapping[str, Any], metric: str) -> tuple[float, float] | None:
    raw = metrics.get(f"{metric}_ci")
    if isinstance(raw, (list, tuple)) and len(raw) == 2:
        low, high = number(raw[0]), number(raw[1])
        if low is not None and high is not None:
            return (low, high)
    return None


def _status(
    statuses: Mapping[str, str], rule: Rule, match: re.Match[str], workload: str, metric: str
) -> str | None:
    if rule.check:
        return statuses.get(_fill(rule.check, match))
    return statuses.get(metric, statuses.get(f"{workload}_{metric}"))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def workload_figures(workload: Mapping[str, Any]) -> list[Figure]:
    """The headline figures of one Workload JSON document."""
    name = str(workload.get("workload", ""))
    # Documents come from hosts: a field of the wrong type means "no figures", never a crash.
    metrics = _mapping(workload.get("metrics"))
    thresholds = _mapping(_mapping(workload.get("config")).get("thresholds"))
    floors = _mapping(_mapping(workload.get("config")).get("floors"))
    rules = RULES.get(name, GENERIC)
    statuses = {
        str(c.get("name")): str(c.get("status"))
        for c in workload.get("checks") or ()
        if isinstance(c, Mapping)
    }
    found = []
    for metric, raw in metrics.items():
        value = number(raw)
        if value is None:
            continue
        for rule in rules:
            match = re.fullmatch(rule.pattern, metric)
            if match is None:
                continue
            # The floor the workload judged it against, by the dotted name (gemm records its
            # legacy gemm_<p>_fraction_min key too, which decides only where no floor exists).
            dotted = rule.floor or canonical(name, metric) or f"{name}.{metric}"
            threshold = number(_mapping(floors.get(dotted)).get("value"))
            if threshold is None and rule.threshold_key:
                threshold = number(thresholds.get(_fill(rule.threshold_key, match)))
                threshold = threshold if threshold else None
            if threshold is None and "." in metric:  # a floor named as the metric itself
                threshold = number(_mapping(floors.get(metric)).get("value"))
            found.append(
                Figure(
                    workload=name,
                    metric=metric,
                    kind=rule.kind,
                    variant=_fill(rule.variant, match) or "default",
                    value=value,
                    threshold=threshold,
                    higher_is_better=rule.higher_is_better,
                    ci=_ci(metrics, metric),
                    status=_status(statuses, rule, match, name, metric),
                    compared=rule.compared,
                )
            )
            break
    return found


def figures_of(document: Mapping[str, Any]) -> list[Figure]:
    """Every headline figure of a results document, workload by workload."""
    found = []
    for workload in document.get("workloads") or ():
        if isinstance(workload, Mapping):
            found.extend(workload_figures(workload))
    return found
