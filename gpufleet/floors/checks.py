"""Pure checks of figures against floors: one value, per-GPU values, outliers, GPU balance."""

from __future__ import annotations

import difflib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.floors.derived import OUTLIER_BELOW_MEDIAN, Floor, FloorError
from gpufleet.floors.names import dotted

Number = (int, float)  # a tuple: isinstance on Python 3.9 hosts (no int | float there)


@dataclass(frozen=True)
class Verdict:
    """``passed`` None: not judged (no floor for the figure, or no figure for the floor)."""

    name: str
    passed: bool | None
    figure: float | None
    floor: float | None
    detail: str


def _is_number(value: object) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def meets(figure: float, floor: Floor) -> bool:
    """Whether one figure satisfies a set floor (``bound`` "min": >=, "max": <=)."""
    if floor.value is None:
        raise FloorError(f"{floor.name} has no floor to meet")
    return figure >= floor.value if floor.bound == "min" else figure <= floor.value


def against(figure: float, floor: Floor, who: str = "") -> Verdict:
    """One figure against one floor, e.g. ``against(1700.0, amp_floor).passed is False``."""
    name = f"{floor.name}[{who}]" if who else floor.name
    if floor.value is None:
        return Verdict(
            name, None, figure, None, f"{figure:g} {floor.unit}: no floor ({floor.origin})"
        )
    ok = meets(figure, floor)
    sign = ">=" if floor.bound == "min" else "<="
    word = "ok" if ok else "FAIL"
    detail = f"{figure:g} {floor.unit}, floor {sign} {floor.value:g} ({word})"
    return Verdict(name, ok, figure, floor.value, detail)


def outliers(
    per_gpu: Mapping[str, float], max_below_median: float = OUTLIER_BELOW_MEDIAN
) -> dict[str, float]:
    """GPUs more than ``max_below_median`` below the host median -> their shortfall (0.2 = 20 %).

    Example: ``outliers({"0": 100, "1": 100, "2": 79})`` -> ``{"2": 0.21}``. Fewer than 3 GPUs
    have no meaningful median and give {}.
    """
    if len(per_gpu) < 3:
        return {}
    median = statistics.median(per_gpu.values())
    if median <= 0:
        return {}
    short = {gpu: round(1 - v / median, 3) for gpu, v in per_gpu.items()}
    return {gpu: s for gpu, s in short.items() if s > max_below_median}


def per_gpu(per_gpu_figures: Mapping[str, float], floor: Floor) -> list[Verdict]:
    """Every GPU against the floor, then the outlier check when the floor carries one."""
    verdicts = [against(v, floor, gpu) for gpu, v in sorted(per_gpu_figures.items())]
    if floor.outlier is not None:
        slow = outliers(per_gpu_figures, floor.outlier)
        median = statistics.median(per_gpu_figures.values()) if per_gpu_figures else 0.0
        detail = (
            f"GPU(s) {', '.join(f'{g} ({s:.0%} below)' for g, s in sorted(slow.items()))} more "
            f"than {floor.outlier:.0%} below the host median {median:g} {floor.unit}"
            if slow
            else f"no GPU more than {floor.outlier:.0%} below the host median {median:g}"
        )
        if len(per_gpu_figures) >= 3:
            name = f"{floor.name}.outliers"
            verdicts.append(Verdict(name, not slow, None, floor.outlier, detail))
    return verdicts


def utilization_balance(
    per_gpu_pct: Mapping[str, float], min_pct: float, max_spread_pct: float
) -> Verdict:
    """Every GPU busy during a multi-GPU phase: each >= ``min_pct`` and max-min <= the spread.

    Catches a model built outside ``strategy.scope()``: GPU:0 near 100 %, the others near 0 %.
    """
    if not per_gpu_pct:
        return Verdict("gpu_balance", None, None, min_pct, "no per-GPU utilization")
    idle = sorted(g for g, v in per_gpu_pct.items() if v < min_pct)
    spread = max(per_gpu_pct.values()) - min(per_gpu_pct.values())
    problems = []
    if idle:
        problems.append(f"GPU(s) {', '.join(idle)} below {min_pct:g} %")
    if spread > max_spread_pct:
        problems.append(f"spread {spread:g} points > {max_spread_pct:g}")
    detail = "; ".join(problems) or f"every GPU >= {min_pct:g} %, spread {spread:g} points"
    return Verdict("gpu_balance", not problems, spread, max_spread_pct, detail)


def figures_from(doc: object) -> dict[str, object]:
    """The figures of a --judge file: a results document (every ``workloads[].metrics``), one
    workload document's ``metrics``, or a flat {name: value} map.

    A workload document (``{"workload": "mirrored", "metrics": {"scaling_efficiency": ...}}``)
    has its bare metric names prefixed with the workload's name.
    """
    if not isinstance(doc, dict):
        raise FloorError(
            "the figures file must hold a JSON object: {name: value} or {'metrics': {...}}"
        )
    if isinstance(doc.get("workloads"), list) and "metrics" not in doc:
        merged: dict[str, object] = {}
        for workload in doc["workloads"]:
            merged.update(figures_from(workload))
        return merged
    metrics = doc.get("metrics", doc)
    if not isinstance(metrics, dict):
        raise FloorError("'metrics' must be a JSON object of {name: value}")
    prefix = doc.get("workload") if isinstance(doc.get("workload"), str) else None
    out: dict[str, object] = {}
    for name, value in metrics.items():
        # An old spelling (gemm's fp16_fraction_of_peak, its minimum) as the floor's own name;
        # the per-GPU map (fraction_of_peak.fp16) wins over that minimum.
        key = dotted(prefix or "", str(name))
        if not isinstance(out.get(key), dict):
            out[key] = value
    return out


def _values(name: str, value: object, floor: Floor) -> float | dict[str, float]:
    if _is_number(value):
        return float(value)  # type: ignore[arg-type]
    mapping = value if floor.per_gpu and isinstance(value, dict) else {}
    if mapping and all(_is_number(v) for v in mapping.values()):
        return {str(g): float(v) for g, v in mapping.items()}
    want = "a number or a non-empty {gpu: number} map" if floor.per_gpu else "a number"
    raise FloorError(f"figure {name!r} is {value!r}: expected {want}")


def judge(floors: Sequence[Floor], figures: Mapping[str, object]) -> list[Verdict]:
    """Every figure with a floor judged; floors without figures and figures without floors
    come back with ``passed`` None. Per-GPU utilization maps also get the balance check.
    FloorError when a figure is not a number (or a per-GPU map where one is allowed).
    """
    by_name = {f.name: f for f in floors}
    verdicts: list[Verdict] = []
    for floor in floors:
        if floor.name not in figures:
            verdicts.append(Verdict(floor.name, None, None, floor.value, "no figure given"))
            continue
        value = _values(floor.name, figures[floor.name], floor)
        if isinstance(value, dict):
            if floor.value is None:
                low = min(value.values())
                verdicts.append(Verdict(floor.name, None, low, None, f"no floor ({floor.origin})"))
            else:
                verdicts += per_gpu(value, floor)
            spread = by_name.get(f"{floor.name.removesuffix('_pct')}_spread_pct")
            if floor.value is not None and spread is not None and spread.value is not None:
                balance = utilization_balance(value, floor.value, spread.value)
                verdicts.append(
                    Verdict(
                        spread.name, balance.passed, balance.figure, spread.value, balance.detail
                    )
                )
        else:
            verdicts.append(against(value, floor))
    for name in sorted(set(figures) - set(by_name)):
        # A flat name (no workload prefix) was typed by hand: xla_speedup for xla.speedup.amp.
        close = difflib.get_close_matches(name, list(by_name), n=2) if "." not in name else []
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        verdicts.append(Verdict(name, None, None, None, f"no floor for this figure{hint}"))
    return verdicts
