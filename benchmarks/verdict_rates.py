"""Rates of the speed and regression verdicts under simulated GPU noise (issue 12). Asserts nothing.

    .venv/bin/python benchmarks/verdict_rates.py              # 1,000 draws per cell, ~3 min
    .venv/bin/python benchmarks/verdict_rates.py --draws 200  # quicker, coarser

Speed: for every noise model of tests/unit/noise_models.py (stand-ins for a GPU host) and true
speed-ups of 0.8T, 1.0 (no speed-up, T = 1.1), 0.95T, T, 1.05T and 1.2T, the share of checks that
pass and fail, and the mean processes and pairs per check, for the full tier (3 processes x 12
pairs) and the quick tier (2 x 8). Every check runs compare_ab (settled warm-up, ABBA pairs) in
each simulated process and judge_runs over them, as the suite does.

Regressions: regression_verdict on a log-normal figure with run-to-run CV 3/4/5 %: false alarms
of a healthy host over 50 periodic runs, and the share of 5/10/15 % drops caught within 5
periodic runs (quick baseline of 20 runs), and by one `gpufleet validate` run against a full
baseline of 5 runs.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpufleet.validate.baseline import RUNS_WANTED, regression_verdict  # noqa: E402
from tests.unit.noise_models import MODELS, speed_check  # noqa: E402

THRESHOLD = 1.1
RATIOS = (("0.8T", 0.8), ("1.0", 1.0 / THRESHOLD), ("0.95T", 0.95), ("T", 1.0), ("1.05T", 1.05))
RATIOS += (("1.2T", 1.2),)
TIERS = {"full": (3, 12), "quick": (2, 8)}


def speed_table(tier: str, draws: int, seed: int) -> None:
    processes, pairs = TIERS[tier]
    print(f"\n## Speed verdicts, {tier} tier ({processes} processes x {pairs} pairs), T = 1.1")
    print(f"P(pass)/P(fail) in %, {draws} draws per cell\n")
    print("| model | " + " | ".join(name for name, _ in RATIOS) + " | processes | pairs |")
    print("| --- " * (len(RATIOS) + 3) + "|")
    for model in MODELS:
        cells, used_processes, used_pairs = [], [], []
        for _, relative in RATIOS:
            rng = np.random.default_rng(seed)
            counts = {"pass": 0, "fail": 0, "inconclusive": 0}
            for _ in range(draws):
                judged = speed_check(
                    model, relative * THRESHOLD, THRESHOLD, rng, processes=processes, pairs=pairs
                )
                counts[judged.status] += 1
                used_processes.append(judged.processes)
                used_pairs.append(judged.pairs)
            cells.append(f"{100 * counts['pass'] / draws:.1f}/{100 * counts['fail'] / draws:.1f}")
        print(
            f"| {model.name} | {' | '.join(cells)} | {np.mean(used_processes):.1f} | "
            f"{np.mean(used_pairs):.1f} |",
            flush=True,
        )


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
    parser.add_argument("--draws", type=int, default=1000, help="speed checks per cell (1000)")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts per regression cell")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--tier", choices=("full", "quick", "both"), default="both")
    args = parser.parse_args()
    started = time.monotonic()
    for tier in ("full", "quick") if args.tier == "both" else (args.tier,):
        speed_table(tier, args.draws, args.seed)
    regression_table(args.hosts, args.seed)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
