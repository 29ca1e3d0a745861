"""The harness's contract: judge_runs over processes, refusals, warm-up, assumption tests."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from validation.verdicts.harness import (
    FAIL,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    PASS,
    HarnessError,
    Verdict,
    combine,
    compare_ab,
    judge_runs,
    judge_sample_runs,
    judge_samples,
    order_statistic_interval,
    settled,
)

RECORDINGS = Path(__file__).parents[1] / "fixtures" / "harness" / "cpu_ab_recordings.json"


def _run_a() -> None:
    """Stand-in for arm A; the replay clock says how long it took."""


def _run_b() -> None:
    """Stand-in for arm B."""


def replay_clock(seconds_a: list[float], seconds_b: list[float]) -> Callable[..., float]:
    """A clock for compare_ab that returns recorded timings instead of timing the call."""
    feeds: dict[Callable[[], None], Iterator[float]] = {
        _run_a: iter(seconds_a),
        _run_b: iter(seconds_b),
    }
    return lambda fn: next(feeds[fn])


def steady(ratio: float, n: int = 12, noise: float = 0.01, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [
        (float(np.exp(rng.normal(0, noise))), float(np.exp(rng.normal(0, noise)) / ratio))
        for _ in range(n)
    ]


# --- judge_runs: the public contract ----------------------------------------------------------


def test_clear_speedup_over_three_processes_passes() -> None:
    runs = [steady(1.5, seed=s) for s in range(3)]
    judged = judge_runs(runs, 1.1)
    assert judged.status == PASS and judged.processes == 3 and judged.pairs == 36
    assert judged.estimate is not None and judged.estimate.median == pytest.approx(1.5, rel=0.02)
    assert "between-run spread 5.0 % (default)" in judged.reason


def test_no_speedup_fails_and_a_feature_near_the_threshold_stays_inconclusive() -> None:
    assert judge_runs([steady(1.0, seed=s) for s in range(3)], 1.1).status == FAIL
    # 3 % under the threshold: within what 5 % between-process noise can do to three processes.
    assert judge_runs([steady(1.067, seed=s) for s in range(3)], 1.1).status == INCONCLUSIVE
    # 5 % over it: at or above the floor, and "no speed-up" ruled out (review 2, N2: the old
    # rule asked the interval to clear the floor itself, so this stayed inconclusive).
    assert judge_runs([steady(1.155, seed=s) for s in range(3)], 1.1).status == PASS


def test_one_process_cannot_pass_what_three_can() -> None:
    """The between-process spread does not shrink with more pairs in one process."""
    assert judge_runs([steady(1.14, n=200)], 1.1).status == INCONCLUSIVE
    assert judge_runs([steady(1.14, seed=s) for s in range(3)], 1.1).status == PASS


def test_a_host_history_spread_replaces_the_default() -> None:
    runs = [steady(1.25, seed=s) for s in range(3)]
    assert judge_runs(runs, 1.1, between_run_sd=0.2).status == INCONCLUSIVE
    judged = judge_runs(runs, 1.1, between_run_sd=0.01)
    assert judged.status == PASS and "(host history)" in judged.reason


def test_spread_between_processes_seen_in_the_runs_widens_the_interval() -> None:
    # Per-process ratios 1.2, 1.5 and 1.9: the runs themselves show a spread far above 5 %.
    runs = [steady(r, seed=i) for i, r in enumerate((1.2, 1.5, 1.9))]
    judged = judge_runs(runs, 1.1)
    assert judged.spread_source == "runs" and judged.status == INCONCLUSIVE


def test_many_processes_use_their_own_spread() -> None:
    runs = [steady(1.3, seed=s) for s in range(6)]
    judged = judge_runs(runs, 1.1)
    assert judged.spread_source == "runs" and judged.status == PASS


def test_the_throughput_ratio_must_clear_the_threshold_too() -> None:
    """B stalls 3x on 2 of 12 calls: the median ratio is 1.5, sum A / sum B only ~1.1."""
    runs = []
    for seed in range(3):
        pairs = steady(1.5, seed=seed)
        pairs[3] = (pairs[3][0], pairs[3][1] * 3.0)
        pairs[8] = (pairs[8][0], pairs[8][1] * 3.0)
        runs.append(pairs)
    judged = judge_runs(runs, 1.3)
    assert judged.estimate is not None and judged.estimate.median > 1.4
    assert judged.throughput is not None and judged.throughput.median < 1.3
    assert judged.status != PASS


def test_a_tie_at_the_threshold_is_not_a_pass() -> None:
    runs = [[(1.1, 1.0)] * 12] * 6
    assert judge_runs(runs, 1.1).status == INCONCLUSIVE
    _, verdict = judge_samples([0.5] * 8, threshold=0.5, what="x")
    assert verdict.status == INCONCLUSIVE


def test_a_trend_in_the_ratios_is_inconclusive() -> None:
    """An arm still warming up: A's time falls 2 % per pair."""
    runs = [[(1.5 * (1 + 0.02 * (12 - i)), 1.0) for i in range(12)] for _ in range(3)]
    judged = judge_runs(runs, 1.1)
    assert judged.status == INCONCLUSIVE and "trend" in judged.reason


def test_serially_correlated_ratios_are_inconclusive() -> None:
    """Load in spells: the ratio sits high for six pairs, then low for six."""
    spell = [1.6] * 6 + [1.4] * 6
    runs = [[(r, 1.0) for r in spell[::-1] + spell] for _ in range(3)]
    judged = judge_runs(runs, 1.1)
    assert judged.status == INCONCLUSIVE
    assert "serially correlated" in judged.reason or "trend" in judged.reason
    # ABBA-interleaved drift alternates (negative correlation): no refusal for that.
    alternating = [[(1.5 * (1.01 if i % 2 else 0.99), 1.0) for i in range(12)] for _ in range(3)]
    assert judge_runs(alternating, 1.1).status == PASS


def test_fewer_than_six_pairs_in_a_process_is_inconclusive() -> None:
    runs = [steady(2.0, n=12), steady(2.0, n=5), steady(2.0, n=12)]
    judged = judge_runs(runs, 1.1)
    assert judged.status == INCONCLUSIVE and "too few pairs" in judged.reason


@pytest.mark.parametrize(
    ("runs", "threshold", "kwargs", "match"),
    [
        ([[(1.0, 0.0)] * 8], 1.1, {}, "finite and > 0"),
        ([[(1.0, math.inf)] * 8], 1.1, {}, "finite and > 0"),
        ([[(math.nan, 1.0)] * 8], 1.1, {}, "finite and > 0"),
        ([[(-1.0, -1.3)] * 8], 1.1, {}, "finite and > 0"),
        ([[(1.0, 1.0)] * 8], math.nan, {}, "threshold"),
        ([[(1.0, 1.0)] * 8], 0.0, {}, "threshold"),
        ([[(1.0, 1.0)] * 8], -1.0, {}, "threshold"),
        ([[(1.0, 1.0)] * 8], 1.1, {"confidence": 1.0}, "confidence"),
        ([[(1.0, 1.0)] * 8], 1.1, {"confidence": -1}, "confidence"),
        ([[(1.0, 1.0)] * 8], 1.1, {"between_run_sd": math.nan}, "between_run_sd"),
        ([], 1.1, {}, "non-empty"),
        ([[(1.0,)] * 8], 1.1, {}, "pairs"),
    ],
)
def test_meaningless_input_is_refused(runs: list, threshold: float, kwargs: dict, match: str):
    with pytest.raises(HarnessError, match=match):
        judge_runs(runs, threshold, **kwargs)


def test_every_public_function_refuses_meaningless_input() -> None:
    with pytest.raises(HarnessError, match="finite"):
        order_statistic_interval([1.0, 2.0, math.nan, 4.0, 5.0, 6.0], 0.95)
    with pytest.raises(HarnessError, match="confidence"):
        order_statistic_interval([1.0] * 6, 1.5)
    with pytest.raises(HarnessError, match="finite"):
        judge_samples([1.0, math.inf, 1.0], threshold=0.5, what="x")
    with pytest.raises(HarnessError, match="threshold"):
        judge_samples([1.0] * 6, threshold=0.0, what="x")
    with pytest.raises(HarnessError, match="finite and > 0"):
        judge_sample_runs([[1.0, 0.0, 1.0]], 0.5, what="TFLOPS")
    with pytest.raises(HarnessError, match="threshold"):
        compare_ab(_run_a, _run_b, threshold=math.nan, clock=lambda fn: 1.0)
    with pytest.raises(HarnessError, match="finite and > 0"):
        compare_ab(_run_a, _run_b, threshold=1.1, clock=lambda fn: 0.0 if fn is _run_b else 1.0)


def test_judge_sample_runs_judges_figures_across_processes() -> None:
    runs = [[0.71, 0.72, 0.73, 0.72]] * 3
    assert judge_sample_runs(runs, 0.5, what="fraction").status == PASS
    assert judge_sample_runs(runs, 0.9, what="fraction").status == FAIL
    assert judge_sample_runs(runs, 0.74, what="fraction").status == INCONCLUSIVE
    # At or above the floor, and 1/1.1 of it ruled out: a pass (the old rule: inconclusive).
    assert judge_sample_runs(runs, 0.7, what="fraction").status == PASS


# --- compare_ab: one process ------------------------------------------------------------------


def test_warm_up_continues_until_both_arms_settle() -> None:
    # A is 30 %, 15 %, 6 % slow on its first calls, then steady; B steady from the start.
    a = [1.3, 1.15, 1.06] + [1.0] * 40
    b = [0.5] * 43
    result = compare_ab(_run_a, _run_b, threshold=1.1, pairs=8, clock=replay_clock(a, b))
    assert result.settled
    warm_a = result.warmup_seconds[0::2]
    assert warm_a[:3] == [1.3, 1.15, 1.06] and len(warm_a) >= 5
    assert result.seconds_a == [1.0] * 8  # no pair carries the warm-up


def test_an_arm_that_keeps_getting_faster_is_not_settled() -> None:
    assert not settled([1.03, 1.02, 1.01], 0.03)
    assert settled([1.01, 1.03, 1.02], 0.03)
    assert not settled([1.0, 1.1, 1.0], 0.03)


def test_compare_ab_interleaves_abba_and_reports_pairs() -> None:
    order: list[str] = []

    def clock(fn: Callable[[], None]) -> float:
        order.append("A" if fn is _run_a else "B")
        return 1.0 if fn is _run_a else 0.5

    result = compare_ab(_run_a, _run_b, threshold=1.1, pairs=4, clock=clock)
    timed = order[len(result.warmup_seconds) :]
    assert "".join(timed) == "ABBAABBA"
    assert result.pairs == [(1.0, 0.5)] * 4
    assert result.judgement is not None and result.judgement.processes == 1


def test_not_applicable_still_times_the_pairs() -> None:
    result = compare_ab(
        _run_a, _run_b, threshold=1.1, pairs=6, not_applicable="no GPU", clock=lambda fn: 1.0
    )
    assert result.verdict == Verdict(NOT_APPLICABLE, "no GPU")
    assert len(result.pairs) == 6


def test_recorded_cpu_timings_judge_as_expected() -> None:
    """Real CPU recordings (tests/fixtures/harness): one process each, 5 % default spread."""
    recorded = json.loads(RECORDINGS.read_text())

    def pairs(name: str) -> list[tuple[float, float]]:
        entry = recorded[name]
        return list(zip(entry["seconds_a"], entry["seconds_b"], strict=True))

    assert judge_runs([pairs("clear_slowdown")], 1.0).status == FAIL
    same = judge_runs([pairs("same_step")], 1.0)
    assert same.status == INCONCLUSIVE
    assert judge_runs([pairs("same_step")], 1.1).status != PASS


def test_combine_orders_fail_inconclusive_pass() -> None:
    ok, bad = Verdict(PASS, "ok"), Verdict(FAIL, "slow")
    maybe = Verdict(INCONCLUSIVE, "noisy")
    assert combine([("a", ok), ("b", maybe)]).status == INCONCLUSIVE
    assert combine([("a", maybe), ("b", bad)]).status == FAIL
    assert combine([("a", ok), ("b", Verdict(NOT_APPLICABLE, "no GPU"))]).status == PASS
