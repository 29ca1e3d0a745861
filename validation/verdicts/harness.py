"""Measurement harness: settled warm-up, interleaved A/B pairs, verdicts across fresh processes.

Every speed claim in the workloads goes through here. A verdict rests on several processes
(the noise between fresh processes, from CUDA context, clocks and memory placement, is as large
as the effects judged), on the per-pair ratio and on the throughput ratio, and a noisy or
drifting machine gives "inconclusive" rather than a confident answer.

Example:
    >>> runs = [[(1.50, 1.00)] * 12, [(1.52, 1.01)] * 12, [(1.49, 0.99)] * 12]
    >>> judge_runs(runs, 1.1).status
    'pass'

Only numpy and the standard library: the workloads that import this run on the hosts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufleet.compat import zip_strict
from validation.verdicts.judge import judge_runs, judge_sample_runs
from validation.verdicts.verdict import (
    DEFAULT_BETWEEN_RUN_SD,
    DEFAULT_CONFIDENCE,
    FAIL,
    INCONCLUSIVE,
    MIN_PAIRS,
    NOT_APPLICABLE,
    PASS,
    STATUSES,
    Estimate,
    HarnessError,
    Judgement,
    Verdict,
    check_confidence,
    check_sd,
    check_threshold,
    combine,
    judge_samples,
    order_statistic_interval,
)

__all__ = [
    "DEFAULT_BETWEEN_RUN_SD",
    "DEFAULT_CONFIDENCE",
    "FAIL",
    "INCONCLUSIVE",
    "MIN_PAIRS",
    "NOT_APPLICABLE",
    "PASS",
    "STATUSES",
    "ABResult",
    "Estimate",
    "HarnessError",
    "Judgement",
    "Verdict",
    "combine",
    "compare_ab",
    "judge_runs",
    "judge_sample_runs",
    "judge_samples",
    "order_statistic_interval",
    "settled",
    "time_call",
]


@dataclass
class ABResult:
    """One process's warm-up and pairs, and the verdict they give on their own."""

    seconds_a: list[float] = field(default_factory=list)
    seconds_b: list[float] = field(default_factory=list)
    warmup_seconds: list[float] = field(default_factory=list)
    settled: bool = False
    judgement: Judgement | None = None
    verdict: Verdict = field(default_factory=lambda: Verdict(INCONCLUSIVE, "not run"))

    @property
    def pairs(self) -> list[tuple[float, float]]:
        return list(zip_strict(self.seconds_a, self.seconds_b))

    @property
    def estimate(self) -> Estimate | None:
        return self.judgement.estimate if self.judgement else None

    @property
    def ratios(self) -> list[float]:
        """Speed-up of B over A per pair: time of A divided by time of B."""
        return [a / b for a, b in self.pairs]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds_a": self.seconds_a,
            "seconds_b": self.seconds_b,
            "warmup_seconds": self.warmup_seconds,
            "settled": self.settled,
            "ratios": self.ratios,
            "judgement": self.judgement.to_dict() if self.judgement else None,
            "verdict": self.verdict.to_dict(),
        }


def time_call(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes (fn must block until its work is done)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _timed(clock: Callable[[Callable[[], object]], float], fn: Callable[[], object]) -> float:
    seconds = clock(fn)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise HarnessError(f"the clock returned {seconds!r}, not a number of seconds")
    if not math.isfinite(seconds) or seconds <= 0:
        raise HarnessError(f"the clock returned {seconds!r} s; a timing must be finite and > 0")
    return float(seconds)


def settled(times: Sequence[float], tolerance: float, last: int = 3) -> bool:
    """Whether an arm is warm: its ``last`` calls agree within ``tolerance`` of their median
    and are not still getting faster call after call (caches, autotuning, clocks ramping)."""
    if len(times) < last:
        return False
    tail = np.asarray(times[-last:])
    falling = bool(np.all(np.diff(tail) < 0))
    return not falling and bool(np.max(np.abs(tail / np.median(tail) - 1.0)) <= tolerance)


def compare_ab(
    run_a: Callable[[], object],
    run_b: Callable[[], object],
    *,
    threshold: float | None,
    pairs: int = 12,
    warmup_max: int = 10,
    tolerance: float = 0.03,
    confidence: float = DEFAULT_CONFIDENCE,
    between_run_sd: float | None = None,
    not_applicable: str | None = None,
    clock: Callable[[Callable[[], object]], float] = time_call,
    on_pair: Callable[[int, float, float], None] | None = None,
) -> ABResult:
    """Warm both arms up until settled, time ``pairs`` interleaved pairs (ABBA), judge them.

    Warm-up alternates A and B until the last three calls of each agree within ``tolerance``
    (at most ``warmup_max`` calls per arm; an arm still drifting then shows as a trend and the
    verdict is inconclusive). ABBA order cancels linear drift. The verdict here is this one
    process's (judge_runs with one run); the suite and the periodic runner judge the pairs of
    every process together. With ``not_applicable`` set (e.g. "no GPU") or no threshold the
    pairs are timed and reported and the verdict is not_applicable with that reason.
    Raises HarnessError for bad arguments or a timing that is not finite and > 0.

    Example:
        >>> compare_ab(baseline_step, xla_step, threshold=1.1).verdict.status
        'pass'
    """
    if pairs < 1 or warmup_max < 1 or not 0 < tolerance < 1:
        raise HarnessError(
            f"need pairs >= 1, warmup_max >= 1 and 0 < tolerance < 1; got pairs={pairs}, "
            f"warmup_max={warmup_max}, tolerance={tolerance}"
        )
    if threshold is not None and not_applicable is None:
        check_threshold(threshold)
    check_confidence(confidence)
    check_sd(between_run_sd)
    result = ABResult()
    warm: dict[str, list[float]] = {"a": [], "b": []}
    while len(warm["a"]) < warmup_max:
        warm["a"].append(_timed(clock, run_a))
        warm["b"].append(_timed(clock, run_b))
        if settled(warm["a"], tolerance) and settled(warm["b"], tolerance):
            result.settled = True
            break
    result.warmup_seconds = [t for pair in zip_strict(warm["a"], warm["b"]) for t in pair]
    while len(result.seconds_a) < pairs:
        if len(result.seconds_a) % 2 == 0:
            result.seconds_a.append(_timed(clock, run_a))
            result.seconds_b.append(_timed(clock, run_b))
        else:
            result.seconds_b.append(_timed(clock, run_b))
            result.seconds_a.append(_timed(clock, run_a))
        if on_pair is not None:
            on_pair(len(result.seconds_a), result.seconds_a[-1], result.seconds_b[-1])
    judged = judge_runs(
        [result.pairs],
        threshold if threshold is not None and not_applicable is None else 1.0,
        confidence=confidence,
        between_run_sd=between_run_sd,
    )
    result.judgement = judged
    if not_applicable is not None or threshold is None:
        result.verdict = Verdict(NOT_APPLICABLE, not_applicable or "no threshold set")
    else:
        result.verdict = judged.verdict
    return result
