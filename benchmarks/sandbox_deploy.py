"""Wall time and control-node memory of the deploy on sandbox fleets of several sizes (needs root).

    python benchmarks/sandbox_deploy.py                      # first deploy on 1, 3, 8 hosts, ...
    python benchmarks/sandbox_deploy.py --deploy-hosts 3 --dry-hosts 8

For each size in --deploy-hosts: a fresh sandbox, the first deploy, the idempotent second run
(pyinfra -y, the way users run it), and `pyinfra --dry --json` on the provisioned hosts. For
each size in --dry-hosts: `pyinfra --dry --json` on a fresh sandbox of bare hosts (the full plan;
32 provisioned hosts would need ~40 GB of disk for their TensorFlow environments). Prints
numbers and the control node's peak memory; asserts nothing. Targets
(issue 4, 2-core machine): second run on 3 hosts <= 5 s, --dry --json on 32 hosts < 20 s, peak
control-node memory for 32 hosts < 1 GiB.
control-node memory for 32 hosts < 1 GiB. Where one is missed, the same command runs again under
benchmarks/fact_profile.py and the output names the stages whose facts cost the time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fact_profile  # benchmarks/fact_profile.py, beside this script

REPO = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
PROFILER = Path(__file__).resolve().with_name("fact_profile.py")
INVENTORY_DEPLOY = ["inventories/sandbox.py", "deploy/gpu_node.py"]
# (label, hosts) -> (seconds, MiB): issue 4's targets on a 2-core machine.
TARGETS: dict[tuple[str, int], tuple[float | None, float | None]] = {
    ("idempotent second run (-y)", 3): (5.0, None),
    ("--dry --json, bare hosts", 32): (20.0, 1024.0),
}


def timed(command: list[str]) -> tuple[float, float, int]:
    """Run `command`; return (wall seconds, peak RSS in MiB of that process, exit status)."""
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def gpufleet(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpufleet.cli", *args], cwd=REPO, check=True)


def report(label: str, hosts: int, wall: float, rss: float, status: int) -> bool:
    """Print one figure and how it stands against its target; True when a target is missed."""
    flag = "" if status == 0 else f"  (exit {status})"
    seconds, mib = TARGETS.get((label, hosts), (None, None))
    missed = []
    if seconds is not None and wall > seconds:
        missed.append(f"over {seconds:g} s")
    if mib is not None and rss > mib:
        missed.append(f"over {mib:g} MiB")
    if missed:
        flag += "  MISSED target: " + ", ".join(missed)
    elif seconds is not None or mib is not None:
        flag += "  meets target"
    print(f"{label:34} {hosts:3d} hosts  {wall:8.1f} s  peak {rss:7.1f} MiB{flag}", flush=True)
    return bool(missed)


def explain(pyinfra_args: list[str]) -> None:
    """Run the pyinfra command again with its facts timed per stage, and print where it went."""
    handle, name = tempfile.mkstemp(prefix="gpufleet-facts-", suffix=".json")
    os.close(handle)
    try:
        wall, _rss, _status = timed([sys.executable, str(PROFILER), name, *pyinfra_args])
        print(f"  where the time goes (profiled rerun, {wall:.1f} s):", flush=True)
        for line in fact_profile.summary(Path(name)):
            print(line, flush=True)
    finally:
        Path(name).unlink(missing_ok=True)


def measure(label: str, hosts: int, pyinfra_args: list[str]) -> None:
    if report(label, hosts, *timed([PYINFRA, *pyinfra_args])):
        explain(pyinfra_args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deploy-hosts", default="1,3,8", help="sizes for first/second deploy")
    parser.add_argument("--dry-hosts", default="8,32", help="sizes for --dry --json")
    parser.add_argument(
        "--keep-up", action="store_true", help="leave the last sandbox up (for benchmarks/drift.py)"
    )
    args = parser.parse_args()
    parallel = ["--parallel", "32"]
    dry = ["--dry", "--json", *parallel, *INVENTORY_DEPLOY]
    done = False
    try:
        for size in [int(n) for n in args.deploy_hosts.split(",") if n]:
            gpufleet("sandbox", "up", "--hosts", str(size))
            report("first deploy", size, *timed([PYINFRA, "-y", *parallel, *INVENTORY_DEPLOY]))
            measure("idempotent second run (-y)", size, ["-y", *parallel, *INVENTORY_DEPLOY])
            measure("--dry --json, provisioned hosts", size, dry)
        for size in [int(n) for n in args.dry_hosts.split(",") if n]:
            gpufleet("sandbox", "up", "--hosts", str(size))
            measure("--dry --json, bare hosts", size, dry)
        done = True
    finally:
        if not (done and args.keep_up):
            gpufleet("sandbox", "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
