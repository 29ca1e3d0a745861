"""Print the CPU timings of every validation workload, tier by tier (issue 13 item 10).

Runs each workload of validation.verdicts.tiers as the suite does (``python -m
validation.workloads.NAME [--quick] --json FILE``, one fresh process, this checkout on PYTHONPATH)
and prints its wall time (process start and TensorFlow import included) and its own ``duration_s``.
Asserts nothing: on a GPU-less machine the figures are CPU timings (the workloads' CPU sizes, the
same in both tiers), the cost CI pays; the GPU estimates are in
docs/explanation/time-budget.md. The quick tier's workloads are then timed again in one process,
as the tier runs them on a host.

    .venv/bin/python benchmarks/workload_timings.py                 # both tiers
    .venv/bin/python benchmarks/workload_timings.py --tier quick --workloads xla,gemm
    .venv/bin/python benchmarks/workload_timings.py --checkout ../other-worktree   # its workloads
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _tiers(checkout: Path) -> dict[str, list[str]]:
    """The checkout's own tiers (validation/verdicts/tiers.py), read in a subprocess of it."""
    code = "import json, validation.verdicts.tiers as t; print(json.dumps(t.TIERS))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
    )
    tiers: dict[str, list[str]] = json.loads(out.stdout)
    return tiers


def time_workload(
    python: str, checkout: Path, name: str, quick: bool, timeout_s: int
) -> dict[str, object]:
    """One workload in a fresh process: wall seconds, its duration_s and verdict."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        out = Path(tmp) / "doc.json"
        command = [python, "-m", f"validation.workloads.{name}", "--json", str(out)]
        command += ["--quick"] if quick else []
        env = {**os.environ, "PYTHONPATH": str(checkout), "TF_CPP_MIN_LOG_LEVEL": "2"}
        started = time.monotonic()
        proc = subprocess.run(
            command, cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        wall = time.monotonic() - started
        try:
            doc = json.loads(out.read_text())
        except (OSError, json.JSONDecodeError):
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return {"wall_s": wall, "duration_s": None, "verdict": f"no document: {tail[0]}"}
    verdict = doc.get("verdict") or {}
    return {"wall_s": wall, "duration_s": doc.get("duration_s"), "verdict": verdict.get("status")}


def time_bundle(python: str, checkout: Path, names: list[str], timeout_s: int) -> float:
    """Wall seconds of ``names`` in one process (validation.workloads.bundle), as the quick
    tier runs them on a host."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        command = [python, "-m", "validation.workloads.bundle", "--quick", "--json-dir", tmp]
        command += ["--workloads", ",".join(names)]
        env = {**os.environ, "PYTHONPATH": str(checkout), "TF_CPP_MIN_LOG_LEVEL": "2"}
        started = time.monotonic()
        subprocess.run(command, cwd=checkout, env=env, capture_output=True, timeout=timeout_s)
        return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=("quick", "full", "both"), default="both")
    parser.add_argument("--workloads", help="comma-separated names (default: the tier's)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with TensorFlow")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per workload")
    parser.add_argument(
        "--checkout", type=Path, default=REPO, help="the gpufleet checkout whose workloads run"
    )
    args = parser.parse_args()
    tiers_of = _tiers(args.checkout)
    tiers = ("quick", "full") if args.tier == "both" else (args.tier,)
    print(f"{'tier':6} {'workload':20} {'wall s':>8} {'in-process s':>13}  verdict")
    for tier in tiers:
        names = args.workloads.split(",") if args.workloads else list(tiers_of[tier])
        total = 0.0
        for name in names:
            row = time_workload(args.python, args.checkout, name, tier == "quick", args.timeout)
            total += float(row["wall_s"])  # type: ignore[arg-type]
            inside = row["duration_s"]
            shown = f"{inside:13.1f}" if isinstance(inside, int | float) else f"{'-':>13}"
            print(f"{tier:6} {name:20} {row['wall_s']:8.1f} {shown}  {row['verdict']}")
        print(f"{tier:6} {'total':20} {total:8.1f}")
        if tier == "quick" and not args.workloads:
            bundled = time_bundle(args.python, args.checkout, names, args.timeout)
            print(f"{tier:6} {'one process (bundle)':20} {bundled:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
