"""Regression verdicts: a figure's later runs against the spread of its baseline runs (CUSUM).

Standard library only: ``validation.periodic`` runs this on the hosts. Reached as
``gpufleet.validate.baseline.regression_verdict``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

REGRESSED = "regressed"
OK = "ok"
INCONCLUSIVE = "inconclusive"
MIN_BASELINE_RUNS = 5
# Later runs older than this window join the baseline's runs in the level and sd estimate
# (a self-starting CUSUM: five baseline runs alone misplace the level by sd / sqrt(5)); the
# CUSUM itself runs over the window, so a drop is judged against the history before it.
WINDOW = 5
# The drop that must be caught, as a fraction (10 %).
DETECT_DROP = 0.10
# The CUSUM's reference, as a fraction of that drop, and its decision interval in standard
# deviations. The textbook reference (half the drop) with h = 3 caught a 10 % drop within 5
# periodic runs only ~94 % of the time at a 4 % run-to-run CV; a smaller reference with a wider
# interval accumulates the same evidence faster for a drop this large: 0.3 and 4.9 catch ~95.7 %
# with ~0.8 % false alarms per host per 50 healthy runs (benchmarks/verdict_rates.py prints them).
REFERENCE_FRACTION = 0.3
DECISION_SD = 4.9
# Beside the CUSUM, one run alone this many sd (and at least the drop) below the level is a
# regression at once (a Shewhart limit): what a single `gpufleet validate` run against its
# baseline is judged by (at 5 sd the periodic false alarms stay ~0.8 % per host per 50 runs).
SINGLE_RUN_SD = 5.0
# Floor of the run-to-run sd (of the log figure): five baseline runs can understate it badly.
SD_FLOOR = 0.03
ABSOLUTE_SD_FLOOR = 0.02  # the same floor for figures compared in absolute terms (slowdowns)


@dataclass(frozen=True)
class RegressionVerdict:
    """``status`` regressed | ok | inconclusive, the reason, and the figures behind it."""

    status: str
    reason: str
    change: float | None = None  # latest relative change (absolute for absolute figures)
    statistic: float | None = None  # the CUSUM at the end, in sd
    alarm_at: int | None = None  # index into current_values where the alarm went off


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def regression_verdict(
    baseline_values: Sequence[float | None],
    current_values: Sequence[float | None],
    *,
    higher_is_better: bool = True,
    absolute: bool = False,
    min_baseline: int = MIN_BASELINE_RUNS,
    drop: float = DETECT_DROP,
    decision_sd: float = DECISION_SD,
    what: str = "figure",
) -> RegressionVerdict:
    """Whether ``current_values`` (later runs, oldest first) fell below the baseline's level.

    The baseline's runs give the level (mean of the log figure) and the run-to-run sd (floored
    at 3 %). A one-sided CUSUM over the current runs, with reference ``REFERENCE_FRACTION`` of
    ``drop`` and decision interval ``decision_sd`` sd, says "regressed" once the shortfall has
    built up; a latest run ``SINGLE_RUN_SD`` sd and ``drop`` below the level is "regressed" on
    its own (one current run is judged by that limit and a single CUSUM step). A figure that
    is missing or non-finite in the latest run is "regressed" (the workload crashed or measured
    nothing); a baseline with a value <= 0, or ``absolute``, is compared by differences.

    Example:
        >>> regression_verdict([1.5, 1.52, 1.49, 1.51, 1.5], [1.2, 1.21]).status
        'regressed'
    """
    if not current_values:
        return RegressionVerdict(INCONCLUSIVE, f"{what}: no current run to compare")
    latest = current_values[-1]
    if latest is None or not math.isfinite(float(latest)):
        return RegressionVerdict(
            REGRESSED,
            f"{what} is missing or not finite in the latest run ({latest!r}); its baseline "
            "had a value: the workload crashed, was skipped or measured nothing",
        )
    base = _finite(baseline_values)
    if len(base) < min_baseline:
        return RegressionVerdict(
            INCONCLUSIVE,
            f"{what}: the baseline has {len(base)} of the {min_baseline} runs it needs",
        )
    current = _finite(current_values)
    # Self-starting: runs before the window extend the baseline's estimate of level and sd.
    base = base + current[:-WINDOW]
    current = current[-WINDOW:]
    absolute = absolute or min(base) <= 0 or min(current) <= 0
    sign = 1.0 if higher_is_better else -1.0
    if absolute:
        level, now = list(base), list(current)
        floor, step = ABSOLUTE_SD_FLOOR, drop
    else:
        level = [math.log(v) for v in base]
        now = [math.log(v) for v in current]
        floor, step = SD_FLOOR, -math.log1p(-drop)
    mean = sum(level) / len(level)
    sd = max(math.sqrt(sum((v - mean) ** 2 for v in level) / (len(level) - 1)), floor)
    reference = REFERENCE_FRACTION * step / sd
    cusum, alarm = 0.0, None
    offset = len(current_values) - len(now)
    for index, value in enumerate(now, start=offset):
        shortfall = sign * (mean - value) / sd
        cusum = max(0.0, cusum + shortfall - reference)
        if cusum == 0.0:
            alarm = None
        elif alarm is None and cusum > decision_sd:
            alarm = index
    alarm = alarm if cusum > decision_sd else None
    # A single run alone must be both SINGLE_RUN_SD sd and the tuned drop below the level.
    if alarm is None and shortfall > max(SINGLE_RUN_SD, step / sd):
        alarm = len(current_values) - 1
    if absolute:
        change = sign * (current[-1] - (sum(base) / len(base)))
        moved = f"changed by {change:+.3g}"
    else:
        change = math.exp(now[-1] - mean) - 1.0
        side = "below" if change < 0 else "above"
        moved = f"{abs(change) * 100:.1f} % {side} the baseline level"
    spread = f"{sd:.3g} absolute" if absolute else f"{sd * 100:.1f} %"
    detail = (
        f"{what} {current[-1]:.4g}, {moved} ({len(base)} baseline runs, run-to-run sd "
        f"{spread}; CUSUM {cusum:.1f} of {decision_sd:g} sd "
        f"over {len(now)} run(s))"
    )
    if alarm is not None:
        return RegressionVerdict(REGRESSED, f"regressed: {detail}", change, cusum, alarm)
    return RegressionVerdict(OK, f"no regression: {detail}", change, cusum, None)
