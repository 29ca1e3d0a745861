"""Measurement harness: warm-up, interleaved A/B pairs, median ratio with a bootstrap interval.

Every speed claim in the workloads goes through here, so that no verdict rests on one sample
and a noisy machine gives "inconclusive" rather than a false pass.

Example:
    >>> result = compare_ab(run_float32, run_mixed, threshold=1.5, min_pairs=5, max_pairs=20)
    >>> result.verdict.status
    'pass'

Only numpy and the standard library: the workloads that import this run on the hosts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not_applicable"
STATUSES = (PASS, FAIL, INCONCLUSIVE, NOT_APPLICABLE)

# Fewest samples any verdict may rest on; below this the answer is always "inconclusive".
MIN_SAMPLES_FOR_VERDICT = 3


class HarnessError(ValueError):
    """Raised for a harness call that cannot give a meaningful answer (bad arguments)."""


@dataclass(frozen=True)
class Verdict:
    """A status from STATUSES and a reason a person can act on."""

    status: str
    reason: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise HarnessError(f"verdict status {self.status!r} is not one of {STATUSES}")

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "reason": self.reason}


@dataclass(frozen=True)
class Estimate:
    """Median of samples with a bootstrap confidence interval of that median."""

    median: float
    low: float
    high: float
    confidence: float
    samples: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def order_statistic_interval(
    values: Sequence[float] | np.ndarray, confidence: float
) -> tuple[float, float]:
    """Distribution-free interval for the median: [x_(k), x_(n+1-k)] from the binomial law.

    Holds its coverage for any distribution and any n; (-inf, inf) when n is too small for
    ``confidence`` (for 95 %, fewer than 6 values).

    Example:
        >>> order_statistic_interval([3.0, 1.0, 2.0, 5.0, 4.0, 6.0], 0.95)
        (1.0, 6.0)
    """
    data = np.sort(np.asarray(values, dtype=float))
    n = data.size
    tail = (1.0 - confidence) / 2.0
    # Largest k with P(Binomial(n, 1/2) <= k - 1) <= tail.
    k, cumulative = 0, 0.0
    while k < n // 2:
        cumulative += math.comb(n, k) / 2.0**n
        if cumulative > tail:
            break
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return float(data[k - 1]), float(data[n - k])


def bootstrap_median(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Estimate:
    """Median of ``values`` with a percentile-bootstrap interval (seeded: reproducible).

    Percentile bootstraps of a median under-cover on small samples (with 5 values the lower
    bound is the minimum about 6 % of the time whatever the level), so the interval is widened
    to the distribution-free order-statistic interval wherever that is wider. A single noisy
    run can then never carry a verdict.

    Example:
        >>> bootstrap_median([1.0, 1.1, 0.9, 1.05]).median
        1.025
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise HarnessError("bootstrap_median needs at least one value; got none")
    if not np.all(np.isfinite(data)):
        raise HarnessError(f"bootstrap_median got non-finite values: {data.tolist()}")
    if not 0.0 < confidence < 1.0:
        raise HarnessError(f"confidence must lie strictly between 0 and 1; got {confidence}")
    median = float(np.median(data))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    boot_low, boot_high = np.percentile(medians, [tail, 100.0 - tail])
    exact_low, exact_high = order_statistic_interval(data, confidence)
    low, high = min(float(boot_low), exact_low), max(float(boot_high), exact_high)
    return Estimate(median, low, high, confidence, int(data.size))


def decide(estimate: Estimate, threshold: float, *, what: str = "ratio") -> Verdict:
    """Pass when the interval's lower bound clears ``threshold``, fail when its upper bound is
    below it, inconclusive otherwise (or with fewer than MIN_SAMPLES_FOR_VERDICT samples).

    Higher is better: express "at most X slower" as the inverse ratio before calling.

    Example:
        >>> decide(Estimate(2.0, 1.8, 2.2, 0.95, 10), 1.5).status
        'pass'
    """
    interval = (
        f"{what} {estimate.median:.3f} "
        f"({estimate.confidence:.1%} CI {estimate.low:.3f}..{estimate.high:.3f}, "
        f"n={estimate.samples}) vs threshold {threshold:.3f}"
    )
    if estimate.samples < MIN_SAMPLES_FOR_VERDICT:
        return Verdict(INCONCLUSIVE, f"too few samples for a verdict: {interval}")
    if estimate.low >= threshold:
        return Verdict(PASS, f"clears the threshold: {interval}")
    if estimate.high < threshold:
        return Verdict(FAIL, f"below the threshold: {interval}")
    return Verdict(INCONCLUSIVE, f"interval straddles the threshold: {interval}")


@dataclass
class ABResult:
    """Raw timings of every pair, the per-pair ratios A/B, their estimate and the verdict."""

    seconds_a: list[float] = field(default_factory=list)
    seconds_b: list[float] = field(default_factory=list)
    warmup_seconds: list[float] = field(default_factory=list)
    estimate: Estimate | None = None
    verdict: Verdict = field(default_factory=lambda: Verdict(INCONCLUSIVE, "not run"))

    @property
    def ratios(self) -> list[float]:
        """Speed-up of B over A per pair: time of A divided by time of B."""
        return [a / b for a, b in zip(self.seconds_a, self.seconds_b, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds_a": self.seconds_a,
            "seconds_b": self.seconds_b,
            "warmup_seconds": self.warmup_seconds,
            "ratios": self.ratios,
            "estimate": self.estimate.to_dict() if self.estimate else None,
            "verdict": self.verdict.to_dict(),
        }


def time_call(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes (fn must block until its work is done)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare_ab(
    run_a: Callable[[], object],
    run_b: Callable[[], object],
    *,
    threshold: float | None,
    warmup: int = 1,
    min_pairs: int = 8,
    max_pairs: int = 20,
    step: int = 4,
    confidence: float = 0.95,
    seed: int = 0,
    not_applicable: str | None = None,
    clock: Callable[[Callable[[], object]], float] = time_call,
    on_pair: Callable[[int, float, float], None] | None = None,
) -> ABResult:
    """Time A and B in interleaved pairs (ABBA order, to cancel drift) and judge B's speed-up.

    The speed-up per pair is time(A) / time(B); its median and bootstrap interval are judged
    against ``threshold`` with ``decide``. While inconclusive, ``step`` more pairs are added up
    to ``max_pairs``. Each look at the data is a chance of a false verdict, so ``confidence``
    is split over the possible looks (Bonferroni): overall, a B no faster than the threshold
    passes with probability at most (1 - confidence) / 2. ``on_pair(index, seconds_a,
    seconds_b)`` is called after each pair (the workloads log it). With ``not_applicable``
    set (e.g. "no GPU") or no threshold, the pairs are still timed and reported but the
    verdict is not_applicable with that reason.

    Example:
        >>> compare_ab(baseline_step, xla_step, threshold=1.1).verdict.status
        'pass'
    """
    if min_pairs < 1 or max_pairs < min_pairs or step < 1 or warmup < 0:
        raise HarnessError(
            f"need warmup >= 0, 1 <= min_pairs <= max_pairs and step >= 1; got warmup={warmup}, "
            f"min_pairs={min_pairs}, max_pairs={max_pairs}, step={step}"
        )
    looks = 1 + math.ceil((max_pairs - min_pairs) / step)
    per_look = 1.0 - (1.0 - confidence) / looks
    result = ABResult()
    for _ in range(warmup):
        result.warmup_seconds.append(clock(run_a))
        result.warmup_seconds.append(clock(run_b))
    target = min_pairs
    while True:
        while len(result.seconds_a) < target:
            if len(result.seconds_a) % 2 == 0:
                result.seconds_a.append(clock(run_a))
                result.seconds_b.append(clock(run_b))
            else:
                result.seconds_b.append(clock(run_b))
                result.seconds_a.append(clock(run_a))
            if on_pair is not None:
                on_pair(len(result.seconds_a), result.seconds_a[-1], result.seconds_b[-1])
        result.estimate = bootstrap_median(result.ratios, confidence=per_look, seed=seed)
        if not_applicable is not None or threshold is None:
            reason = not_applicable or "no threshold set"
            result.verdict = Verdict(NOT_APPLICABLE, reason)
            return result
        result.verdict = decide(result.estimate, threshold, what="speed-up")
        if result.verdict.status != INCONCLUSIVE or target >= max_pairs:
            return result
        target = min(max_pairs, target + step)


def judge_samples(
    values: Sequence[float],
    *,
    threshold: float | None,
    what: str,
    confidence: float = 0.95,
    seed: int = 0,
    not_applicable: str | None = None,
) -> tuple[Estimate, Verdict]:
    """Estimate and verdict for repeated measurements of one figure (higher is better).

    Example:
        >>> samples = [0.71, 0.73, 0.72, 0.70, 0.74, 0.72]
        >>> estimate, verdict = judge_samples(samples, threshold=0.6, what="fraction of peak")
        >>> verdict.status
        'pass'
    """
    estimate = bootstrap_median(values, confidence=confidence, seed=seed)
    if not_applicable is not None or threshold is None:
        return estimate, Verdict(NOT_APPLICABLE, not_applicable or "no threshold set")
    return estimate, decide(estimate, threshold, what=what)


def combine(checks: Sequence[tuple[str, Verdict]]) -> Verdict:
    """One verdict from named ones: any fail fails, then any inconclusive, then pass if any passed.

    Example:
        >>> checks = [("loss", Verdict("pass", "ok")), ("gpu", Verdict("not_applicable", "no GPU"))]
        >>> combine(checks).status
        'pass'
    """
    if not checks:
        return Verdict(NOT_APPLICABLE, "no checks ran")
    for status in (FAIL, INCONCLUSIVE):
        hits = [f"{name}: {v.reason}" for name, v in checks if v.status == status]
        if hits:
            return Verdict(status, "; ".join(hits))
    passed = [name for name, v in checks if v.status == PASS]
    skipped = sorted({v.reason for _, v in checks if v.status == NOT_APPLICABLE})
    if passed:
        note = f"; not applicable: {'; '.join(skipped)}" if skipped else ""
        return Verdict(PASS, f"passed: {', '.join(passed)}{note}")
    return Verdict(NOT_APPLICABLE, "; ".join(skipped))
