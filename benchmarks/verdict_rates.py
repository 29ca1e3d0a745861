"""Rates of the speed and regression verdicts under simulated GPU noise (issues 12, 32); no asserts.

    .venv/bin/python benchmarks/verdict_rates.py              # 1,000 draws per cell, a few min
    .venv/bin/python benchmarks/verdict_rates.py --draws 200  # quicker, coarser
    .venv/bin/python benchmarks/verdict_rates.py --tier quick --between-sd 0.02 --no-regressions

Goals (issue 32, review 2 N2), per noise model of tests/unit/noise_models.py (the project's
stand-ins for a GPU host, and the review's 5 % / 2 % between-process spreads):

- healthy at 1.10x its floor: >= 95 % of runs pass;
- no effect (a speed-up of 1.0 against a floor of 1.1; a figure 1/1.1 of its floor): <= 0.1 %
  of runs pass;
- a 10 % regression is caught within 5 periodic runs in >= 95 % of hosts.

Speed checks are judged as the suite judges them: one fresh process (compare_ab: settled
warm-up, ABBA pairs), then one more while the verdict is inconclusive, up to the tier's
budget (validation.verdicts.tiers.PROCESSES; alpha shared among the looks). Throughput figures the
same way through judge_sample_runs. Regressions: regression_verdict on a log-normal figure with
run-to-run CV 3/4/5 %, as before. ``--between-sd`` judges with a known between-process spread
(a calibration file's per-figure ``between_run_sd``, else the inventory's speed_between_run_sd:
validation.workloads._run.Run.spread_for) instead of the assumed
5 %: with one process (the quick tier) no rule meets both goals on a host whose processes
really spread by 5 % (a pass bar low enough for 95 % at 1.10x passes 1/1.1 too often).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpufleet.validate.baseline import RUNS_WANTED, regression_verdict  # noqa: E402
from tests.unit.noise_models import (  # noqa: E402
    ALL_MODELS,
    Model,
    adaptive_check,
    adaptive_figure_check,
)
from validation.verdicts.harness import Judgement  # noqa: E402
from validation.verdicts.tiers import PROCESSES  # noqa: E402

THRESHOLD = 1.1
# Relative to the floor: no effect (1/1.1), at the floor, the healthy goal (1.10x), clear (1.2x).
LEVELS = (("no effect", 1.0 / THRESHOLD), ("0.95x", 0.95), ("1.0x", 1.0), ("1.10x", 1.10))
LEVELS += (("1.2x", 1.2),)
PAIRS = {"full": 12, "quick": 8}
BLOCKS = 3  # throughput blocks per process (validation.workloads._throughput)
Check = Callable[[Model, float, np.random.Generator, int], Judgement]
# --between-sd: the host's between-process spread as the inventory's speed_between_run_sd sets
# it (None: judge.py's 5 % default), e.g. 0.02 for a spread measured at calibration.
BETWEEN_SD: list[float | None] = [None]


def _speed(model: Model, relative: float, rng: np.random.Generator, budget: int) -> Judgement:
    sd = BETWEEN_SD[0]
    return adaptive_check(
        model, relative * THRESHOLD, THRESHOLD, rng, budget=budget, between_run_sd=sd
    )


def _figure(model: Model, relative: float, rng: np.random.Generator, budget: int) -> Judgement:
    return adaptive_figure_check(
        model,
        relative * 1000.0,
        1000.0,
        rng,
        budget=budget,
        blocks=BLOCKS,
        between_run_sd=BETWEEN_SD[0],
    )


def table(kind: str, check: Check, tier: str, draws: int, seed: int) -> list[str]:
    """Print one table; return the models that miss a goal."""
    budget = PROCESSES[tier]
    print(f"\n## {kind}, {tier} tier (1 to {budget} processes, added while inconclusive)")
    print(f"P(pass)/P(fail) in %, {draws} draws per cell\n")
    print("| model | " + " | ".join(name for name, _ in LEVELS) + " | mean processes | goals |")
    print("| --- " * (len(LEVELS) + 3) + "|")
    missed = []
    for model in ALL_MODELS:
        cells, used, passed = [], [], {}
        for name, relative in LEVELS:
            rng = np.random.default_rng(seed)
            counts = {"pass": 0, "fail": 0, "inconclusive": 0}
            for _ in range(draws):
                judged = check(model, relative, rng, budget)
                counts[judged.status] += 1
                used.append(judged.processes)
            passed[name] = counts["pass"] / draws
            cells.append(f"{100 * passed[name]:.1f}/{100 * counts['fail'] / draws:.1f}")
        ok = passed["1.10x"] >= 0.95 and passed["no effect"] <= 0.001
        if not ok:
            missed.append(model.name)
        print(
            f"| {model.name} | {' | '.join(cells)} | {np.mean(used):.2f} | "
            f"{'met' if ok else 'MISSED'} |",
            flush=True,
        )
    return missed


def _alarm_within(base: list[float], series: list[float], runs: int) -> bool:
    return any(
        regression_verdict(base, series[:t]).status == "regressed" for t in range(1, runs + 1)
    )


def regression_table(hosts: int, seed: int) -> None:
    quick, full = RUNS_WANTED["quick"], RUNS_WANTED["full"]
    print(f"\n## Regressions ({hosts} simulated hosts per cell)\n")
    print(
        "| run-to-run CV | false alarm, 50 healthy periodic runs | caught within 5 periodic "
        "runs: 5 / 10 / 15 % drop | one validate run vs 5-run baseline: 5 / 10 / 15 % |"
    )
    print("| --- | --- | --- | --- |")
    for cv in (0.03, 0.04, 0.05):
        sigma = math.sqrt(math.log1p(cv * cv))
        rng = np.random.default_rng(seed)
        false_alarms = 0
        for _ in range(hosts):
            base = list(np.exp(rng.normal(0, sigma, quick)))
            false_alarms += _alarm_within(base, list(np.exp(rng.normal(0, sigma, 50))), 50)
        caught, single = [], []
        for drop in (0.05, 0.10, 0.15):
            hits = one = 0
            for _ in range(hosts):
                base = list(np.exp(rng.normal(0, sigma, quick)))
                later = list(np.exp(rng.normal(math.log(1 - drop), sigma, 5)))
                hits += _alarm_within(base, later, 5)
                full_base = list(np.exp(rng.normal(0, sigma, full)))
                one += _alarm_within(full_base, later[:1], 1)
            caught.append(f"{100 * hits / hosts:.1f}")
            single.append(f"{100 * one / hosts:.1f}")
        print(
            f"| {cv:.0%} | {100 * false_alarms / hosts:.2f} % | {' / '.join(caught)} % | "
            f"{' / '.join(single)} % |",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000, help="checks per cell (1000)")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts per regression cell")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--tier", choices=("full", "quick", "both"), default="both")
    parser.add_argument(
        "--between-sd",
        type=float,
        default=None,
        help="the host's between-process spread as speed_between_run_sd (default: 5 %% assumed)",
    )
    parser.add_argument("--no-regressions", action="store_true", help="skip the CUSUM table")
    args = parser.parse_args()
    BETWEEN_SD[0] = args.between_sd
    spread = "assumed 5 %" if args.between_sd is None else f"set to {args.between_sd:.1%}"
    print(f"between-process spread: {spread} (speed_between_run_sd)")
    started = time.monotonic()
    missed: dict[str, list[str]] = {}
    for tier in ("full", "quick") if args.tier == "both" else (args.tier,):
        for kind, check in (("Speed-up checks", _speed), ("Throughput figures", _figure)):
            missed[f"{kind}, {tier}"] = table(kind, check, tier, args.draws, args.seed)
    if not args.no_regressions:
        regression_table(args.hosts, args.seed)
    print("\n## Goals missed (healthy 1.10x >= 95 % pass, no effect <= 0.1 % pass)\n")
    for where, models in missed.items():
        print(f"- {where}: {', '.join(models) or 'none'}")
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
