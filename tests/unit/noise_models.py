"""Simulated GPU timers for the harness: the noise models of issue 12, seeded and fast.

Stand-ins for a GPU host, named as such: each model gives a ``clock`` for one fresh process
that returns how long a call of arm A or arm B "took", so that compare_ab (warm-up, ABBA pairs)
and judge_runs run exactly as on a host. Every model keeps the host's long-run throughput
ratio E[t_A] / E[t_B] at the requested ``ratio``.

``speed_check`` judges a fixed number of processes; ``adaptive_check`` and
``adaptive_figure_check`` add processes one at a time while the verdict is inconclusive, up to
a budget, as the suite does (validation.verdicts.processes.undecided). The review's models (review
2, N2: an assumed 5 % between-process spread, a measured per-class 2 %) are ``REVIEW_MODELS``.

Used by tests/unit/test_verdict_simulation.py and benchmarks/verdict_rates.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from validation.verdicts.harness import (
    DEFAULT_CONFIDENCE,
    INCONCLUSIVE,
    Judgement,
    compare_ab,
    judge_runs,
    judge_sample_runs,
    settled,
)


def run_a() -> None:
    """Stand-in for arm A (the baseline arm); the simulated clock says how long it took."""


def run_b() -> None:
    """Stand-in for arm B (the feature arm)."""


def _lognormal(rng: np.random.Generator, cv: float) -> float:
    sigma = math.sqrt(math.log1p(cv * cv))
    return float(rng.lognormal(-sigma * sigma / 2, sigma))


@dataclass(frozen=True)
class Model:
    """One noise model: per-call noise, plus the effects that break naive A/B tests."""

    name: str
    cv: float = 0.01  # log-normal per-call noise
    tail_p: float = 0.0  # share of calls 3-10x slower (both arms)
    drift: float = 0.0  # time rising linearly by this fraction over 60 calls
    bimodal_p: float = 0.0  # share of calls at base clock (+15 % time)
    offset_sd: float = 0.0  # sd of the per-process log offset of the ratio
    stall_b: float = 0.0  # share of B calls stalled 1.5x
    warm_a: float = 0.0  # A this much slower at start, decaying with tau 6 calls
    load_sd: float = 0.0  # AR(1) load (phi 0.9) slowing A fully and B 0.4x

    def clock(
        self, rng: np.random.Generator, ratio: float
    ) -> Callable[[Callable[[], None]], float]:
        """A simulated timer for one fresh process of a host whose true speed-up is ``ratio``."""
        offset = math.exp(rng.normal(0.0, self.offset_sd)) if self.offset_sd else 1.0
        base_b = 1.0 / ratio / offset
        if self.stall_b:
            base_b /= 1.0 + 0.5 * self.stall_b  # so that E[t_B] stays 1 / ratio
        tail_mean = 1.0 + self.tail_p * (6.5 - 1.0)
        calls = [0]
        load = [0.0]

        def clock(fn: Callable[[], None]) -> float:
            k = calls[0]
            calls[0] += 1
            t = (1.0 if fn is run_a else base_b) * _lognormal(rng, self.cv)
            if self.tail_p and rng.random() < self.tail_p:
                t *= rng.uniform(3.0, 10.0)
            t /= tail_mean
            if self.drift:
                t *= 1.0 + self.drift * k / 60.0
            if self.bimodal_p and rng.random() < self.bimodal_p:
                t *= 1.15
            if fn is run_b and self.stall_b and rng.random() < self.stall_b:
                t *= 1.5
            if fn is run_a and self.warm_a:
                t *= 1.0 + self.warm_a * math.exp(-k / 2 / 6.0)
            if self.load_sd:
                load[0] = 0.9 * load[0] + rng.normal(0.0, self.load_sd * math.sqrt(1 - 0.81))
                t *= math.exp(load[0] if fn is run_a else 0.4 * load[0])
            return t

        return clock


MODELS = (
    Model("lognormal_cv1", cv=0.01),
    Model("lognormal_cv3", cv=0.03),
    Model("lognormal_cv10", cv=0.10),
    Model("heavy_tails", cv=0.03, tail_p=0.02),
    Model("drift_15", cv=0.01, drift=0.15),
    Model("bimodal_clocks", cv=0.01, bimodal_p=0.4),
    Model("offset_sd3", cv=0.01, offset_sd=0.03),
    Model("offset_sd5", cv=0.01, offset_sd=0.05),
    Model("stall_b", cv=0.01, stall_b=0.10),
    Model("underwarmed_a", cv=0.01, warm_a=0.10),
    Model("correlated_load", cv=0.01, load_sd=0.05),
)
MODELS_BY_NAME = {m.name: m for m in MODELS}


def speed_check(
    model: Model,
    true_ratio: float,
    threshold: float,
    rng: np.random.Generator,
    *,
    processes: int = 3,
    pairs: int = 12,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Judgement:
    """One speed verdict as the suite reaches it: ``processes`` fresh processes, then judge_runs."""
    runs = []
    for _ in range(processes):
        clock = model.clock(rng, true_ratio)
        result = compare_ab(run_a, run_b, threshold=threshold, pairs=pairs, clock=clock)
        runs.append(result.pairs)
    return judge_runs(runs, threshold, confidence=confidence)


# Review 2 (N2): a healthy Keras host's between-process spread of a figure, as the review
# assumed it (5 %, the default) and as a per-class calibration might measure it (2 %), each
# with 1 % per-call noise.
REVIEW_MODELS = (
    Model("review_between5", cv=0.01, offset_sd=0.05),
    Model("review_between2", cv=0.01, offset_sd=0.02),
)
ALL_MODELS = MODELS + REVIEW_MODELS
MODELS_BY_NAME.update({m.name: m for m in REVIEW_MODELS})


def adaptive_check(
    model: Model,
    true_ratio: float,
    threshold: float,
    rng: np.random.Generator,
    *,
    budget: int = 3,
    pairs: int = 12,
    between_run_sd: float | None = None,
) -> Judgement:
    """A speed verdict reached as the suite reaches it: one process, then one more while the
    verdict is inconclusive, up to ``budget``, every look sharing alpha among ``budget``;
    ``between_run_sd`` as the inventory's speed_between_run_sd sets it (None: 5 %)."""
    runs: list[list[tuple[float, float]]] = []
    judged: Judgement | None = None
    while len(runs) < budget and (judged is None or judged.status == INCONCLUSIVE):
        clock = model.clock(rng, true_ratio)
        runs.append(compare_ab(run_a, run_b, threshold=threshold, pairs=pairs, clock=clock).pairs)
        judged = judge_runs(runs, threshold, looks=budget, between_run_sd=between_run_sd)
    assert judged is not None
    return judged


def figure_samples(
    model: Model, level: float, rng: np.random.Generator, blocks: int
) -> list[float]:
    """One process's timed blocks of a throughput figure (images/s) whose blocks read ``level``
    on average over clock states, tails left out (a 3-10x stall is a disturbance, not the GPU's
    speed; the median ignores it), in a process without offset: warmed up as
    validation.workloads._throughput.warm_up does (settled within 5 %, at most 4 calls), then
    ``blocks`` timed blocks with the model's offset, noise, tails, clocks and load."""
    clock = model.clock(rng, 1.0)
    offset = math.exp(rng.normal(0.0, model.offset_sd)) if model.offset_sd else 1.0
    tail_mean = 1.0 + model.tail_p * (6.5 - 1.0)
    warm: list[float] = []
    while len(warm) < 4:
        warm.append(clock(run_a))
        if settled(warm, 0.05):
            break
    clocks = 1.0 + 0.15 * model.bimodal_p  # the mean slowdown of base-clock blocks
    return [level * offset * clocks / (clock(run_a) * tail_mean) for _ in range(blocks)]


def adaptive_figure_check(
    model: Model,
    level: float,
    floor: float,
    rng: np.random.Generator,
    *,
    budget: int = 3,
    blocks: int = 3,
    between_run_sd: float | None = None,
) -> Judgement:
    """A throughput verdict (judge_sample_runs) with processes added while inconclusive."""
    runs: list[list[float]] = []
    judged: Judgement | None = None
    while len(runs) < budget and (judged is None or judged.status == INCONCLUSIVE):
        runs.append(figure_samples(model, level, rng, blocks))
        judged = judge_sample_runs(
            runs, floor, what="images/s", looks=budget, between_run_sd=between_run_sd
        )
    assert judged is not None
    return judged
