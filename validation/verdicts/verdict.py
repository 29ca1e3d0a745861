"""Verdict types, the refusal of meaningless input, and the single-process sample verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from validation.verdicts import harness_stats as stats

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not_applicable"
STATUSES = (PASS, FAIL, INCONCLUSIVE, NOT_APPLICABLE)

# One-sided 0.1 % per check: a run holds about ten checks, so a host with no speed-up passes
# a run < 0.1 % of the time and a healthy host false-fails a run < 1 % (the error budget,
# docs/explanation/verdicts.md).
DEFAULT_CONFIDENCE = 0.999
# Between-process spread of a speed-up (sd of its log) assumed when neither the runs nor the
# host's history give one: the 3-5 % seen on real GPU hosts, rounded up.
DEFAULT_BETWEEN_RUN_SD = 0.05
# The intended margin a pass rests on (review 2, N2): a figure at or above its floor passes
# once the data rule out that it sits this factor below the floor (for a speed-up floor of
# 1.1, "no effect"); it fails once they rule out that it reaches the floor. The old rule also
# demanded the interval clear the floor itself, so a pass needed 1.167x the floor.
DECISION_MARGIN = 1.1
MIN_PAIRS = 6  # fewest pairs per process; fewer gives "inconclusive"
MIN_RUNS_FOR_SPREAD = 5  # processes needed before the runs' own spread is trusted alone
ASSUMPTION_ALPHA = 0.001  # level of the trend and autocorrelation tests
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
    """A central value with its interval at ``confidence`` and the number of samples."""

    median: float
    low: float
    high: float
    confidence: float
    samples: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class Judgement:
    """What judge_runs / judge_sample_runs decided, with the figures behind it."""

    status: str
    reason: str
    estimate: Estimate | None = None
    throughput: Estimate | None = None
    processes: int = 0
    pairs: int = 0
    between_run_sd: float | None = None
    spread_source: str = ""

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.status, self.reason)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["estimate"] = self.estimate.to_dict() if self.estimate else None
        out["throughput"] = self.throughput.to_dict() if self.throughput else None
        return out


# ------------------------------------------------------------------------- input checks


def check_threshold(threshold: float) -> float:
    """A finite threshold > 0, else HarnessError (a ratio floor of 0 would pass anything)."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise HarnessError(f"threshold must be a number; got {threshold!r}")
    if not math.isfinite(threshold) or threshold <= 0:
        raise HarnessError(f"threshold must be finite and > 0; got {threshold!r}")
    return float(threshold)


def check_confidence(confidence: float) -> float:
    if not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise HarnessError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")
    return float(confidence)


def check_sd(sd: float | None) -> float | None:
    if sd is None:
        return None
    if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not math.isfinite(sd) or sd < 0:
        raise HarnessError(f"between_run_sd must be a finite number >= 0; got {sd!r}")
    return float(sd)


def positive(values: Any, what: str) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1:
        raise HarnessError(f"{what} must be a flat sequence of numbers")
    bad = data[~np.isfinite(data) | (data <= 0)]
    if bad.size:
        raise HarnessError(f"{what} must be finite and > 0; got {bad[:3].tolist()}")
    return data


def pairs_of(run: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        data = np.asarray(run, dtype=float)
    except (TypeError, ValueError):
        raise HarnessError(f"run {index}: expected (time_a, time_b) pairs of numbers") from None
    if data.size == 0:
        return np.empty(0), np.empty(0)
    if data.ndim != 2 or data.shape[1] != 2:
        raise HarnessError(f"run {index}: expected (time_a, time_b) pairs; got shape {data.shape}")
    return (
        positive(data[:, 0], f"run {index} times of A"),
        positive(data[:, 1], f"run {index} times of B"),
    )


def order_statistic_interval(
    values: Sequence[float] | np.ndarray, confidence: float
) -> tuple[float, float]:
    """Distribution-free interval for the median: [x_(k), x_(n+1-k)] from the binomial law.

    (-inf, inf) when n is too small for ``confidence`` (for 95 %, fewer than 6 values).

    Example:
        >>> order_statistic_interval([3.0, 1.0, 2.0, 5.0, 4.0, 6.0], 0.95)
        (1.0, 6.0)
    """
    confidence = check_confidence(confidence)
    data = np.sort(np.asarray(values, dtype=float))
    if not np.all(np.isfinite(data)):
        raise HarnessError(f"order_statistic_interval got non-finite values: {data.tolist()}")
    k = stats.order_statistic_rank(data.size, (1.0 - confidence) / 2.0)
    if k == 0:
        return -math.inf, math.inf
    return float(data[k - 1]), float(data[data.size - k])


def judge_samples(
    values: Sequence[float],
    *,
    threshold: float | None,
    what: str,
    confidence: float = 0.95,
    not_applicable: str | None = None,
    seed: int = 0,
) -> tuple[Estimate, Verdict]:
    """Median and distribution-free interval of samples from one process (GPU utilization).

    Pass when the interval's lower end is above ``threshold``, fail when its upper end is below
    it. The samples must be independent: thin NVML readings first (NvmlSampler.thinned).
    ``seed`` is accepted for old callers and unused.

    Example:
        >>> samples = [0.71, 0.73, 0.72, 0.70, 0.74, 0.72]
        >>> estimate, verdict = judge_samples(samples, threshold=0.6, what="fraction of peak")
        >>> verdict.status
        'pass'
    """
    del seed
    data = np.asarray(values, dtype=float)
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise HarnessError(f"{what}: need finite samples; got {data.tolist()[:5]}")
    confidence = check_confidence(confidence)
    low, high = order_statistic_interval(data, confidence)
    estimate = Estimate(float(np.median(data)), low, high, confidence, int(data.size))
    if not_applicable is not None or threshold is None:
        return estimate, Verdict(NOT_APPLICABLE, not_applicable or "no threshold set")
    threshold = check_threshold(threshold)
    text = (
        f"{what} {estimate.median:.3f} ({confidence:.1%} CI {low:.3f}..{high:.3f}, "
        f"n={data.size}) vs threshold {threshold:.3f}"
    )
    if data.size < MIN_SAMPLES_FOR_VERDICT:
        return estimate, Verdict(INCONCLUSIVE, f"too few samples for a verdict: {text}")
    if low > threshold:
        return estimate, Verdict(PASS, f"clears the threshold: {text}")
    if high < threshold:
        return estimate, Verdict(FAIL, f"below the threshold: {text}")
    return estimate, Verdict(INCONCLUSIVE, f"interval straddles the threshold: {text}")


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
