"""The harness's verdicts on synthetic and recorded A/B measurements."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from validation.harness import (
    FAIL,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    PASS,
    ABResult,
    Estimate,
    HarnessError,
    Verdict,
    bootstrap_median,
    combine,
    compare_ab,
    decide,
    judge_samples,
    order_statistic_interval,
)

RECORDINGS = Path(__file__).parents[1] / "fixtures" / "harness" / "cpu_ab_recordings.json"


def _run_a() -> None:
    """Stand-in for "run variant A"; the replay clock decides how long it took."""


def _run_b() -> None:
    """Stand-in for "run variant B"."""


def replay_clock(seconds_a: list[float], seconds_b: list[float]) -> Callable[..., float]:
    """A clock for compare_ab that returns recorded timings instead of timing the call."""
    feeds: dict[Callable[[], None], Iterator[float]] = {
        _run_a: iter(seconds_a),
        _run_b: iter(seconds_b),
    }

    def clock(fn: Callable[[], None]) -> float:
        return next(feeds[fn])

    return clock


def synthetic_clock(ratio: float, noise: float, seed: int) -> Callable[..., float]:
    """Log-normal timings: B is ``ratio`` times faster than A, each with ``noise`` spread."""
    rng = np.random.default_rng(seed)
    base = {_run_a: 1.0, _run_b: 1.0 / ratio}

    def clock(fn: Callable[[], None]) -> float:
        return float(base[fn] * math.exp(rng.normal(0.0, noise)))

    return clock


def ab(clock: Callable[..., float], threshold: float | None, **kwargs: Any) -> ABResult:
    return compare_ab(_run_a, _run_b, threshold=threshold, clock=clock, **kwargs)


# --- bootstrap and decide -------------------------------------------------------------------


def test_bootstrap_median_is_seeded_and_brackets_the_median() -> None:
    values = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.15]
    first, second = bootstrap_median(values, seed=3), bootstrap_median(values, seed=3)
    assert first == second
    assert first.low <= first.median <= first.high
    assert first.median == pytest.approx(1.05)
    assert first.samples == 7


def test_order_statistic_interval_needs_enough_values_for_its_level() -> None:
    assert order_statistic_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == (-math.inf, math.inf)
    assert order_statistic_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0], 0.95) == (1.0, 6.0)
    # 20 values at 95 %: P(Binomial(20, 1/2) <= 5) = 0.0207 <= 0.025 -> 6th and 15th values.
    assert order_statistic_interval([float(v) for v in range(1, 21)], 0.95) == (6.0, 15.0)


def test_five_steady_samples_still_carry_no_verdict() -> None:
    """With 5 values no 95 % interval for a median exists without assumptions."""
    assert judge_samples([0.71, 0.73, 0.72, 0.70, 0.74], threshold=0.6, what="x")[1].status == (
        INCONCLUSIVE
    )


def test_one_sample_has_an_unbounded_interval_and_no_verdict() -> None:
    estimate = bootstrap_median([5.0])
    assert math.isinf(estimate.low) and math.isinf(estimate.high)
    assert decide(estimate, 1.0).status == INCONCLUSIVE


def test_too_few_samples_is_inconclusive_even_when_clear() -> None:
    estimate = Estimate(median=10.0, low=9.0, high=11.0, confidence=0.95, samples=2)
    verdict = decide(estimate, 1.0)
    assert verdict.status == INCONCLUSIVE
    assert "too few samples" in verdict.reason


@pytest.mark.parametrize(
    ("low", "high", "status"),
    [(1.6, 2.0, PASS), (1.5, 2.0, PASS), (1.0, 1.4, FAIL), (1.2, 1.8, INCONCLUSIVE)],
)
def test_decide_compares_the_interval_with_the_threshold(
    low: float, high: float, status: str
) -> None:
    estimate = Estimate(median=(low + high) / 2, low=low, high=high, confidence=0.95, samples=10)
    verdict = decide(estimate, 1.5)
    assert verdict.status == status
    assert "1.500" in verdict.reason


def test_bad_inputs_are_refused_with_a_reason() -> None:
    with pytest.raises(HarnessError, match="at least one value"):
        bootstrap_median([])
    with pytest.raises(HarnessError, match="non-finite"):
        bootstrap_median([1.0, float("nan")])
    with pytest.raises(HarnessError, match="min_pairs"):
        compare_ab(_run_a, _run_b, threshold=1.0, min_pairs=5, max_pairs=2)
    with pytest.raises(HarnessError, match="not one of"):
        Verdict("great", "typo")


# --- compare_ab on synthetic timings --------------------------------------------------------


def test_clear_speedup_passes() -> None:
    result = ab(synthetic_clock(ratio=2.0, noise=0.05, seed=1), threshold=1.5)
    assert result.verdict.status == PASS
    assert result.estimate is not None
    assert result.estimate.median == pytest.approx(2.0, rel=0.1)


def test_clear_slowdown_fails() -> None:
    result = ab(synthetic_clock(ratio=0.5, noise=0.05, seed=1), threshold=1.0)
    assert result.verdict.status == FAIL


def test_noise_extends_to_the_cap_and_reports_inconclusive() -> None:
    result = ab(
        synthetic_clock(ratio=1.0, noise=0.5, seed=4), threshold=1.0, min_pairs=5, max_pairs=15
    )
    assert result.verdict.status == INCONCLUSIVE
    assert len(result.seconds_a) == 15
    assert len(result.warmup_seconds) == 2


def test_pairs_are_interleaved_abba() -> None:
    calls: list[str] = []

    def clock(fn: Callable[[], object]) -> float:
        calls.append("A" if fn is _run_a else "B")
        return 1.0

    compare_ab(_run_a, _run_b, threshold=None, warmup=0, min_pairs=4, max_pairs=4, clock=clock)
    assert "".join(calls) == "ABBAABBA"


def test_not_applicable_still_measures_every_pair() -> None:
    result = ab(
        synthetic_clock(ratio=3.0, noise=0.01, seed=0),
        threshold=1.5,
        not_applicable="no GPU",
        min_pairs=3,
        max_pairs=3,
    )
    assert result.verdict == Verdict(NOT_APPLICABLE, "no GPU")
    assert len(result.ratios) == 3
    assert result.estimate is not None
    assert result.estimate.median == pytest.approx(3.0, rel=0.05)


@pytest.mark.parametrize("noise", [0.05, 0.2, 0.5])
def test_no_true_speedup_never_passes_over_many_seeds(noise: float) -> None:
    """Property: when B is no faster than A, no seed and no noise level yields a pass."""
    statuses = []
    for seed in range(150):
        result = ab(
            synthetic_clock(ratio=1.0, noise=noise, seed=seed),
            threshold=1.1,
            min_pairs=5,
            max_pairs=20,
            seed=seed,
        )
        statuses.append(result.verdict.status)
    assert PASS not in statuses
    if noise >= 0.5:
        # Heavy noise: mostly undecided rather than a confident "fail".
        assert statuses.count(INCONCLUSIVE) > len(statuses) / 2


def test_true_speedup_at_threshold_rarely_passes() -> None:
    """At exactly the threshold a pass is a false positive; the sequential test keeps it rare."""
    passes = sum(
        ab(synthetic_clock(1.1, 0.2, seed), threshold=1.1, seed=seed).verdict.status == PASS
        for seed in range(200)
    )
    assert passes <= 200 * 0.025


def test_large_true_speedup_passes_over_many_seeds() -> None:
    verdicts = [
        ab(synthetic_clock(2.0, 0.2, seed), threshold=1.3, seed=seed).verdict.status
        for seed in range(100)
    ]
    assert verdicts.count(PASS) >= 95
    assert FAIL not in verdicts


# --- compare_ab on recorded real timings ----------------------------------------------------


@pytest.fixture(scope="module")
def recordings() -> Any:
    return json.loads(RECORDINGS.read_text())


def _replay(recorded: dict[str, list[float]], threshold: float) -> ABResult:
    a, b = recorded["seconds_a"], recorded["seconds_b"]
    # The first recorded pair serves as the warm-up, the rest as pairs.
    return ab(replay_clock(a, b), threshold=threshold, warmup=1, min_pairs=5, max_pairs=len(a) - 1)


def test_recorded_clear_speedup_passes(recordings: dict) -> None:
    result = _replay(recordings["clear_speedup"], threshold=1.5)
    assert result.verdict.status == PASS


def test_recorded_clear_slowdown_fails(recordings: dict) -> None:
    result = _replay(recordings["clear_slowdown"], threshold=1.0)
    assert result.verdict.status == FAIL


def test_recorded_same_step_is_inconclusive_at_ratio_one(recordings: dict) -> None:
    result = _replay(recordings["same_step"], threshold=1.0)
    assert result.verdict.status == INCONCLUSIVE
    assert len(result.seconds_a) == len(recordings["same_step"]["seconds_a"]) - 1


def test_recorded_same_step_never_passes_a_speedup_threshold(recordings: dict) -> None:
    result = _replay(recordings["same_step"], threshold=1.1)
    assert result.verdict.status != PASS


# --- judge_samples and combine --------------------------------------------------------------


def test_judge_samples_pass_fail_and_not_applicable() -> None:
    steady = [0.71, 0.73, 0.72, 0.70, 0.74, 0.72]
    assert judge_samples(steady, threshold=0.6, what="x")[1].status == PASS
    assert judge_samples(steady, threshold=0.8, what="x")[1].status == FAIL
    assert judge_samples(steady, threshold=0.6, what="x", not_applicable="no GPU")[1] == Verdict(
        NOT_APPLICABLE, "no GPU"
    )


def test_combine_orders_fail_inconclusive_pass_not_applicable() -> None:
    ok, na = Verdict(PASS, "ok"), Verdict(NOT_APPLICABLE, "no GPU")
    bad, unsure = Verdict(FAIL, "slow"), Verdict(INCONCLUSIVE, "noisy")
    assert combine([("a", ok), ("b", bad), ("c", unsure)]) == Verdict(FAIL, "b: slow")
    assert combine([("a", ok), ("c", unsure)]).status == INCONCLUSIVE
    passed = combine([("a", ok), ("b", na)])
    assert passed.status == PASS and "no GPU" in passed.reason
    assert combine([("b", na)]) == Verdict(NOT_APPLICABLE, "no GPU")
    assert combine([]).status == NOT_APPLICABLE
