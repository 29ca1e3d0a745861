"""Wall time of `gpufleet drift` on the running sandbox fleet (issue 6: < 20 s for 32 hosts).

    gpufleet sandbox up --hosts 8                 # root; another size: down, then up --hosts 32
    pyinfra -y inventories/sandbox.py deploy/gpu_node.py   # provision, so drift has a clean fleet
    .venv/bin/python benchmarks/drift.py --runs 3

Times the whole command (inventory read, `pyinfra --dry --json --debug`, parsing) without the
quick validation tier, and, for comparison, the bare `pyinfra INVENTORY DEPLOY --dry --json`.
Prints one JSON line at the end; when the target is missed, first the stages whose facts cost the
time (the plan rerun under benchmarks/fact_profile.py). Exits 2 when no sandbox is up, saying
how to start one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import fact_profile  # noqa: E402  (benchmarks/, beside this script)

from gpufleet.drift.plan import DEFAULT_DEPLOY, pyinfra_command  # noqa: E402
from gpufleet.sandbox.state import SandboxError, load_state  # noqa: E402

TARGET_S = {32: 20.0}  # issue 6 acceptance, on a 2-core machine


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    start = time.perf_counter()
    proc = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=env, stdin=subprocess.DEVNULL
    )
    return time.perf_counter() - start, proc


def explain(pyinfra_args: list[str]) -> None:
    """Rerun the plan with its facts timed per stage; print the stages that cost the most."""
    handle, name = tempfile.mkstemp(prefix="gpufleet-facts-", suffix=".json")
    os.close(handle)
    try:
        profiler = Path(__file__).resolve().with_name("fact_profile.py")
        seconds, _ = timed([sys.executable, str(profiler), name, *pyinfra_args])
        print(f"target missed; where the plan's time goes (profiled rerun, {seconds:.1f} s):")
        for line in fact_profile.summary(Path(name)):
            print(line)
    finally:
        Path(name).unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--inventory", default="inventories/sandbox.py")
    parser.add_argument("--deploy", default=str(DEFAULT_DEPLOY))
    args = parser.parse_args()
    try:
        state = load_state()
    except SandboxError as exc:
        print(
            f"no sandbox fleet is up, nothing to measure: {exc}\n"
            "start one (as root) with `gpufleet sandbox up --hosts 8` (or 32), provision it "
            "with `pyinfra -y inventories/sandbox.py deploy/gpu_node.py`, then run this again.",
            file=sys.stderr,
        )
        return 2
    hosts = len(state.hosts)
    drift_cmd = [sys.executable, "-m", "gpufleet.cli", "drift", args.inventory]
    drift_cmd += ["--deploy", args.deploy, "--no-validation", "--json"]
    plan_cmd = [*pyinfra_command(), args.inventory, args.deploy, "--dry", "--json"]
    drift_times: list[float] = []
    plan_times: list[float] = []
    exits: Counter[int] = Counter()
    statuses: Counter[str] = Counter()
    for run in range(args.runs):
        seconds, proc = timed(drift_cmd)
        drift_times.append(seconds)
        exits[proc.returncode] += 1
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            tail = proc.stderr[-2000:]
            print(f"run {run + 1}: drift printed no report:\n{tail}", file=sys.stderr)
            return 1
        statuses.update(host["status"] for host in report["hosts"].values())
        plan_seconds, _ = timed(plan_cmd)
        plan_times.append(plan_seconds)
        print(
            f"run {run + 1}: gpufleet drift {seconds:.1f} s (exit {proc.returncode}), "
            f"bare pyinfra --dry --json {plan_seconds:.1f} s"
        )
    result = {
        "benchmark": "drift",
        "hosts": hosts,
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "drift_wall_s": {
            "median": round(statistics.median(drift_times), 2),
            "min": round(min(drift_times), 2),
            "max": round(max(drift_times), 2),
        },
        "pyinfra_dry_wall_s_median": round(statistics.median(plan_times), 2),
        "exit_statuses": dict(exits),
        "host_statuses": dict(statuses),
    }
    target = TARGET_S.get(hosts)
    if target is not None:
        result["target_s"] = target
        result["meets_target"] = result["drift_wall_s"]["median"] < target
        if not result["meets_target"]:
            explain(plan_cmd[1:] if plan_cmd[0].endswith("pyinfra") else plan_cmd)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
