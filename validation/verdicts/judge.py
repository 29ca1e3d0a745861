"""Speed verdicts across fresh processes: judge_runs (A/B pairs) and judge_sample_runs (figures).

Pure functions (numpy and the standard library): every verdict the workloads, the suite and the
periodic runner give can be recomputed from recorded timings. Reached as
validation.verdicts.harness.*.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from validation.verdicts import harness_stats as stats
from validation.verdicts.verdict import (
    ASSUMPTION_ALPHA,
    DECISION_MARGIN,
    DEFAULT_BETWEEN_RUN_SD,
    DEFAULT_CONFIDENCE,
    FAIL,
    INCONCLUSIVE,
    MIN_PAIRS,
    MIN_RUNS_FOR_SPREAD,
    MIN_SAMPLES_FOR_VERDICT,
    PASS,
    Estimate,
    HarnessError,
    Judgement,
    check_confidence,
    check_sd,
    check_threshold,
    pairs_of,
    positive,
)


def _spread(
    centres: np.ndarray, within_var: float, between_run_sd: float | None
) -> tuple[float, str, int | None]:
    """The sd of one process's estimate (between + within), where it came from, and the t dof.

    The larger of the assumed spread (host history, else the default) and the runs' own;
    with MIN_RUNS_FOR_SPREAD runs or more the runs' own alone, with Student's t.
    """
    assumed_sd = DEFAULT_BETWEEN_RUN_SD if between_run_sd is None else between_run_sd
    source = "default" if between_run_sd is None else "host history"
    assumed = math.sqrt(assumed_sd**2 + within_var)
    if centres.size >= 2:
        observed = float(np.std(centres, ddof=1))
        if centres.size >= MIN_RUNS_FOR_SPREAD:
            return max(observed, math.sqrt(within_var)), "runs", int(centres.size - 1)
        if observed > assumed:
            return observed, "runs", None
    return assumed, source, None


def check_looks(looks: int) -> int:
    """The number of looks (processes a tier may run) an alpha is shared among: an int >= 1."""
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise HarnessError(f"looks must be an integer >= 1; got {looks!r}")
    return looks


def pass_level(threshold: float, *, ratio: bool) -> float:
    """The level a pass must rule out (log units): DECISION_MARGIN below the floor, and for a
    speed-up (``ratio``) never below "no effect", 1.0, unless the floor itself is."""
    level = threshold / DECISION_MARGIN
    if ratio:
        level = max(level, min(threshold, 1.0))
    return math.log(level)


def _decide(
    centres: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    log_t: float,
    level: float,
) -> str | None:
    """PASS when every estimate is at or above the floor and rules out ``level``; FAIL when any
    estimate's upper bound is below the floor; None (inconclusive) otherwise."""
    if all(c >= log_t for c in centres) and all(low > level for low in lows):
        return PASS
    if any(high < log_t for high in highs):
        return FAIL
    return None


def _bounds(
    centre: float, sd: float, runs: int, dof: int | None, confidence: float, looks: int = 1
) -> tuple[float, float, float]:
    """(lower bound for a pass, upper bound for a fail) in log units, and the standard error.

    Each of ``looks`` sequential looks (one per added process) gets an even share of alpha, so
    that adding processes while inconclusive keeps the overall error rate."""
    alpha = (1.0 - confidence) / looks
    # A fail has two ways in (median or throughput), so each gets half of alpha.
    z_pass = stats.t_upper(alpha, dof) if dof else stats.z_upper(alpha)
    z_fail = stats.t_upper(alpha / 2, dof) if dof else stats.z_upper(alpha / 2)
    se = sd / math.sqrt(runs)
    return centre - z_pass * se, centre + z_fail * se, se


def judge_runs(
    runs: Sequence[Sequence[tuple[float, float]]],
    threshold: float,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    between_run_sd: float | None = None,
    min_pairs: int = MIN_PAIRS,
    what: str = "speed-up",
    looks: int = 1,
) -> Judgement:
    """Judge B's speed-up over A (time A / time B) from pairs timed in several fresh processes.

    ``runs`` holds one sequence of (time_a, time_b) pairs per process. Pass when both the
    median per-pair ratio and the throughput ratio (sum A / sum B) clear ``threshold`` at
    ``confidence`` (one-sided), counting the spread between processes: the runs' own, else
    ``between_run_sd`` (the host's history, sd of the log speed-up), else 5 %. Pass when both
    estimates are at or above ``threshold`` and their lower bounds at ``confidence`` rule out
    DECISION_MARGIN below it (and, for a floor above 1, no speed-up at all); fail when either
    upper bound is below ``threshold``; inconclusive otherwise, and when a process has fewer
    than ``min_pairs`` pairs or the ratios trend or are serially correlated. ``looks``: how many
    processes the caller may add while inconclusive (alpha is shared among them).

    Example:
        >>> judge_runs([[(1.0, 1.0)] * 8] * 3, 1.1).status
        'fail'
    """
    threshold = check_threshold(threshold)
    confidence = check_confidence(confidence)
    between_run_sd = check_sd(between_run_sd)
    looks = check_looks(looks)
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or not runs:
        raise HarnessError("runs must be a non-empty sequence of per-process pair sequences")
    arms = [pairs_of(run, index) for index, run in enumerate(runs)]
    pairs = sum(a.size for a, _ in arms)
    short = [str(i) for i, (a, _) in enumerate(arms) if a.size < min_pairs]
    if short:
        return Judgement(
            INCONCLUSIVE,
            f"too few pairs for a verdict: process(es) {', '.join(short)} have fewer than "
            f"{min_pairs} pairs",
            processes=len(arms),
            pairs=pairs,
        )
    logs = [np.log(a / b) for a, b in arms]
    trend, lag1 = stats.trend_z(logs), stats.lag1_z(logs)
    medians = np.array([float(np.median(x)) for x in logs])
    within = float(np.mean([stats.median_se(x) ** 2 for x in logs]))
    sd, source, dof = _spread(medians, within, between_run_sd)
    throughputs = [stats.log_throughput(a, b) for a, b in arms]
    t_centres = np.array([t for t, _ in throughputs])
    t_within = float(np.mean([s**2 for _, s in throughputs]))
    t_sd, _, t_dof = _spread(t_centres, t_within, between_run_sd)
    log_t = math.log(threshold)
    m, t = float(medians.mean()), float(t_centres.mean())
    m_low, m_high, _ = _bounds(m, sd, len(arms), dof, confidence, looks)
    t_low, t_high, _ = _bounds(t, t_sd, len(arms), t_dof, confidence, looks)
    estimate = Estimate(math.exp(m), math.exp(m_low), math.exp(m_high), confidence, pairs)
    total = float(sum(a.sum() for a, _ in arms) / sum(b.sum() for _, b in arms))
    throughput = Estimate(total, math.exp(t_low), math.exp(t_high), confidence, pairs)
    summary = (
        f"{what} {estimate.median:.3f} (bounds {estimate.low:.3f}..{estimate.high:.3f}), "
        f"throughput ratio {total:.3f} ({throughput.low:.3f}..{throughput.high:.3f}) over "
        f"{len(arms)} process(es), {pairs} pairs, vs threshold {threshold:.3f}; "
        f"between-run spread {sd * 100:.1f} % ({source}), one-sided {confidence * 100:.1f} %"
    )
    done: dict[str, Any] = {"estimate": estimate, "throughput": throughput}
    done["processes"] = len(arms)
    done |= {"pairs": pairs, "between_run_sd": sd, "spread_source": source}
    z_assume = stats.z_upper(ASSUMPTION_ALPHA / 2)
    if abs(trend) > z_assume:
        why = f"the pair ratios trend with time (Mann-Kendall z {trend:+.1f}): an arm is still "
        return Judgement(INCONCLUSIVE, why + f"warming up or throttling; {summary}", **done)
    if lag1 > stats.z_upper(ASSUMPTION_ALPHA):
        why = f"the pair ratios are serially correlated (lag-1 z {lag1:+.1f}): load comes in "
        return Judgement(
            INCONCLUSIVE, why + f"spells, pairs are not independent; {summary}", **done
        )
    level = pass_level(threshold, ratio=True)
    # The throughput ratio guards the median against stalls of one arm: its own centre must
    # clear the level; its interval (wide under heavy tails) decides only a fail.
    decided = _decide((m,), (m_low,), (m_high, t_high), log_t, level if t >= level else math.inf)
    if decided == PASS:
        return Judgement(PASS, f"clears the threshold: {summary}", **done)
    if decided == FAIL:
        return Judgement(FAIL, f"below the threshold: {summary}", **done)
    return Judgement(INCONCLUSIVE, f"interval straddles the threshold: {summary}", **done)


def judge_sample_runs(
    runs: Sequence[Sequence[float]],
    threshold: float,
    *,
    what: str,
    confidence: float = DEFAULT_CONFIDENCE,
    between_run_sd: float | None = None,
    min_samples: int = MIN_SAMPLES_FOR_VERDICT,
    looks: int = 1,
) -> Judgement:
    """Judge a positive figure (higher is better: TFLOPS, GB/s) repeated in several processes.

    The same rule as judge_runs on the log of the figure: per-process medians, the spread
    between processes (runs, history or the 5 % default), one-sided ``confidence``, a pass at
    or above the floor once DECISION_MARGIN below it is ruled out, alpha shared over ``looks``.

    Example:
        >>> judge_sample_runs([[0.71, 0.72, 0.73]] * 3, 0.5, what="fraction of peak").status
        'pass'
    """
    threshold = check_threshold(threshold)
    confidence = check_confidence(confidence)
    between_run_sd = check_sd(between_run_sd)
    looks = check_looks(looks)
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or not runs:
        raise HarnessError("runs must be a non-empty sequence of per-process value sequences")
    logs = [np.log(positive(run, f"run {i} values of {what}")) for i, run in enumerate(runs)]
    count = sum(x.size for x in logs)
    if any(x.size < min_samples for x in logs):
        return Judgement(
            INCONCLUSIVE,
            f"too few samples of {what}: each process needs {min_samples}",
            processes=len(logs),
            pairs=count,
        )
    medians = np.array([float(np.median(x)) for x in logs])
    within = float(np.mean([stats.median_se(x) ** 2 for x in logs]))
    sd, source, dof = _spread(medians, within, between_run_sd)
    m = float(medians.mean())
    low, high, _ = _bounds(m, sd, len(logs), dof, confidence, looks)
    estimate = Estimate(math.exp(m), math.exp(low), math.exp(high), confidence, count)
    summary = (
        f"{what} {estimate.median:.4g} (bounds {estimate.low:.4g}..{estimate.high:.4g}) over "
        f"{len(logs)} process(es), {count} samples, vs threshold {threshold:.4g}; "
        f"between-run spread {sd * 100:.1f} % ({source})"
    )
    done: dict[str, Any] = {"estimate": estimate, "processes": len(logs), "pairs": count}
    done |= {"between_run_sd": sd, "spread_source": source}
    decided = _decide(
        (m,), (low,), (high,), math.log(threshold), pass_level(threshold, ratio=False)
    )
    if decided == PASS:
        return Judgement(PASS, f"clears the threshold: {summary}", **done)
    if decided == FAIL:
        return Judgement(FAIL, f"below the threshold: {summary}", **done)
    return Judgement(INCONCLUSIVE, f"interval straddles the threshold: {summary}", **done)
