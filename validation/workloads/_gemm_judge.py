"""GEMM figures per GPU from a sustained window, and their verdicts: floor, outliers, peaks.

Pure (standard library and gpufleet.matrix): the workload's TensorFlow part hands in the
repetitions each GPU ran; everything judged is decided here, so it is tested without a GPU.

Example:
    >>> reps = {"0": [(0.0, 0.5), (0.5, 0.5)], "1": [(0.0, 0.5), (0.5, 1.0)]}
    >>> {g: s["sustained_tflops"] for g, s in summarize(reps, 1e12 * 0.5, 1.0).items()}
    {'0': 1.0, '1': 0.5}
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.floors.checks import outliers
from gpufleet.floors.derived import OUTLIER_BELOW_MEDIAN, Floor, FloorError, find_model
from validation.verdicts.verdict import FAIL, INCONCLUSIVE, NOT_APPLICABLE, PASS, Verdict

# The first share of a sustained window: clocks ramp and boost there, so it is reported apart.
SETTLE = 0.25
# (seconds since the window opened, seconds the repetition took), per GPU.
Reps = Mapping[str, Sequence[tuple[float, float]]]


def matrix_peaks(gpu_model: str | None) -> tuple[dict[str, float], str]:
    """The dense datasheet peaks (TFLOP/s) of ``gpu_model`` from gpufleet.matrix.gpus, and
    where they come from (or why there are none)."""
    if not gpu_model:
        return {}, "no GPU model named by TensorFlow or NVML"
    try:
        model = find_model(gpu_model)
    except FloorError as exc:
        return {}, str(exc)
    if not model.peak_tflops:
        return {}, f"gpufleet.matrix.gpus has no peaks for {model.name}"
    return dict(model.peak_tflops), f"gpufleet.matrix.gpus ({model.datasheet or model.name})"


def summarize(reps: Reps, flops_per_rep: float, window_s: float) -> dict[str, dict[str, float]]:
    """Per GPU: the sustained TFLOP/s (median of the repetitions that started after the first
    SETTLE share of the window), the initial one (those before), and the repetition count.

    A GPU whose clocks drop once it is hot shows sustained < initial; with fewer than 3 late
    repetitions every repetition counts as sustained.
    """
    out: dict[str, dict[str, float]] = {}
    for gpu, runs in reps.items():
        if not runs:
            continue
        rates = [(start, flops_per_rep / seconds / 1e12) for start, seconds in runs]
        late = [r for start, r in rates if start >= SETTLE * window_s]
        early = [r for start, r in rates if start < SETTLE * window_s]
        sustained = late if len(late) >= 3 else [r for _, r in rates]
        out[gpu] = {
            "sustained_tflops": round(statistics.median(sustained), 3),
            "initial_tflops": round(statistics.median(early or sustained), 3),
            "repetitions": len(runs),
        }
    return out


@dataclass(frozen=True)
class GemmVerdicts:
    """The two speed verdicts of one precision: every GPU against its floor, and outliers."""

    floor: Verdict
    outliers: Verdict


def judge(
    precision: str,
    tflops: Mapping[str, float],
    peak: float | None,
    floor: Floor | None,
    *,
    skip: str | None = None,
    busy: str | None = None,
    note: str = "",
) -> GemmVerdicts:
    """Verdicts for one precision from the per-GPU sustained TFLOP/s.

    ``floor`` is gemm.fraction_of_peak.<precision> (a fraction of ``peak``); without a peak or
    a floor value the fraction is not judged, but the outlier check still is: one GPU more than
    OUTLIER_BELOW_MEDIAN below the host median fails, naming it. ``skip`` (no GPU) makes both
    not_applicable, ``busy`` both inconclusive. ``note`` (clock events seen) is appended.
    """
    tail = f"; {note}" if note else ""
    if skip is not None:
        return GemmVerdicts(Verdict(NOT_APPLICABLE, skip), Verdict(NOT_APPLICABLE, skip))
    if busy is not None:
        return GemmVerdicts(Verdict(INCONCLUSIVE, busy), Verdict(INCONCLUSIVE, busy))
    if not tflops:
        why = f"no {precision} repetition finished"
        return GemmVerdicts(Verdict(INCONCLUSIVE, why), Verdict(INCONCLUSIVE, why))
    listing = ", ".join(f"GPU {g} {v:.1f}" for g, v in sorted(tflops.items()))
    if peak is None or floor is None or floor.value is None:
        why = "no datasheet peak" if peak is None else f"no floor ({_origin(floor)})"
        floor_verdict = Verdict(NOT_APPLICABLE, f"{precision}: {why}; TFLOP/s {listing}")
    else:
        fractions = {g: v / peak for g, v in tflops.items()}
        low = sorted(g for g, f in fractions.items() if f < floor.value)
        worst = min(fractions.values())
        if low:
            named = ", ".join(f"GPU {g} {fractions[g]:.2f}" for g in low)
            reason = (
                f"{precision} below {floor.value:g} of the {peak:g} TFLOP/s peak: {named} "
                f"(sustained {listing}){tail}"
            )
            floor_verdict = Verdict(FAIL, reason)
        else:
            reason = (
                f"every GPU >= {floor.value:g} of the {peak:g} TFLOP/s {precision} peak "
                f"(lowest {worst:.2f}; {listing}){tail}"
            )
            floor_verdict = Verdict(PASS, reason)
    return GemmVerdicts(floor_verdict, _outliers(precision, tflops, floor, tail))


def _origin(floor: Floor | None) -> str:
    return "no floor of this name" if floor is None else floor.origin


def _outliers(
    precision: str, tflops: Mapping[str, float], floor: Floor | None, tail: str
) -> Verdict:
    limit = (
        floor.outlier if floor is not None and floor.outlier is not None else OUTLIER_BELOW_MEDIAN
    )
    if len(tflops) < 3:
        return Verdict(
            NOT_APPLICABLE, f"{len(tflops)} GPU(s): a host median needs at least 3 to compare"
        )
    median = statistics.median(tflops.values())
    slow = outliers(tflops, limit)
    if slow:
        named = ", ".join(f"GPU {g} {s:.0%} below" for g, s in sorted(slow.items()))
        return Verdict(
            FAIL,
            f"{precision}: {named} the host median {median:.1f} TFLOP/s (limit {limit:.0%}){tail}",
        )
    return Verdict(
        PASS,
        f"{precision}: no GPU more than {limit:.0%} below the host median {median:.1f} TFLOP/s",
    )
