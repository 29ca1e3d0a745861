"""The statistics under the harness's verdicts: quantiles, spreads, trend and autocorrelation tests.

Pure functions over numbers (numpy and the standard library), so that every verdict can be
reproduced from recorded timings without TensorFlow, processes or clocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()
# Scale of the median absolute deviation to the standard deviation of a normal law.
MAD_TO_SD = 1.482602218505602


def z_upper(alpha: float) -> float:
    """The standard normal quantile with ``alpha`` above it: ``z_upper(0.001)`` is 3.09."""
    return _NORMAL.inv_cdf(1.0 - alpha)


def t_upper(alpha: float, dof: int) -> float:
    """Student's t quantile with ``alpha`` above it, by the Cornish-Fisher expansion.

    Accurate to about 1 % for dof >= 4 at the levels the harness uses; numpy has no t law and
    the hosts run without scipy.
    """
    z = z_upper(alpha)
    n = float(dof)
    return (
        z
        + (z**3 + z) / (4 * n)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3)
    )


def robust_sd(values: np.ndarray) -> float:
    """Standard deviation from the median absolute deviation; the plain one when the MAD is 0."""
    if values.size < 2:
        return 0.0
    mad = float(np.median(np.abs(values - np.median(values)))) * MAD_TO_SD
    return mad if mad > 0 else float(np.std(values, ddof=1))


def median_se(values: np.ndarray) -> float:
    """Standard error of the median: sqrt(pi / 2) * sd / sqrt(n) for a normal law."""
    return math.sqrt(math.pi / 2.0) * robust_sd(values) / math.sqrt(values.size)


def log_throughput(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """log(sum a / sum b) and its standard error (delta method over the pairs)."""
    mean_a, mean_b = float(a.mean()), float(b.mean())
    spread = a / mean_a - b / mean_b
    se = float(np.std(spread, ddof=1)) / math.sqrt(a.size) if a.size > 1 else math.inf
    return math.log(mean_a / mean_b), se


def trend_z(runs: Sequence[np.ndarray]) -> float:
    """Mann-Kendall trend statistic pooled over runs (each run judged against its own order).

    About N(0, 1) when the values of every run are exchangeable; a large |z| means the values
    drift with their index (an arm still warming, throttling that hits one arm).
    """
    total, variance = 0.0, 0.0
    for values in runs:
        n = values.size
        if n < 3:
            continue
        diffs = values[None, :] - values[:, None]
        total += float(np.sign(diffs[np.triu_indices(n, 1)]).sum())
        variance += n * (n - 1) * (2 * n + 5) / 18.0
    return total / math.sqrt(variance) if variance > 0 else 0.0


def lag1_z(runs: Sequence[np.ndarray]) -> float:
    """Pooled lag-1 autocorrelation of the within-run ranks, as a z score.

    Ranks keep one outlier from hiding (or faking) the correlation. Under independence the
    lag-1 coefficient of a run of n values has mean -1/n and variance about 1/n.
    """
    products, squares, runs_used, count = 0.0, 0.0, 0, 0
    for values in runs:
        n = values.size
        if n < 3:
            continue
        ranks = np.argsort(np.argsort(values)).astype(float)
        centred = ranks - ranks.mean()
        products += float(np.dot(centred[:-1], centred[1:]))
        squares += float(np.dot(centred, centred))
        runs_used += 1
        count += n
    if count == 0 or squares == 0:
        return 0.0
    coefficient = products / squares
    # Each run's coefficient has mean -1/n; weighted by n, the pooled one has mean -runs/count.
    return (coefficient + runs_used / count) * math.sqrt(count)


def order_statistic_rank(n: int, tail: float) -> int:
    """Largest k with P(Binomial(n, 1/2) <= k - 1) <= tail (0: no interval at that level)."""
    k, cumulative = 0, 0.0
    while k < n // 2:
        cumulative += math.comb(n, k) / 2.0**n
        if cumulative > tail:
            break
        k += 1
    return k
