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
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
INVENTORY_DEPLOY = ["inventories/sandbox.py", "deploy/gpu_node.py"]


def timed(command: list[str]) -> tuple[float, float, int]:
    """Run `command`; return (wall seconds, peak RSS in MiB of that process, exit status)."""
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def gpufleet(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpufleet.cli", *args], cwd=REPO, check=True)


def report(label: str, hosts: int, wall: float, rss: float, status: int) -> None:
    flag = "" if status == 0 else f"  (exit {status})"
    print(f"{label:34} {hosts:3d} hosts  {wall:8.1f} s  peak {rss:7.1f} MiB{flag}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deploy-hosts", default="1,3,8", help="sizes for first/second deploy")
    parser.add_argument("--dry-hosts", default="8,32", help="sizes for --dry --json")
    args = parser.parse_args()
    parallel = ["--parallel", "32"]
    try:
        for size in [int(n) for n in args.deploy_hosts.split(",") if n]:
            gpufleet("sandbox", "up", "--hosts", str(size))
            first = timed([PYINFRA, "-y", *parallel, *INVENTORY_DEPLOY])
            report("first deploy", size, *first)
            second = timed([PYINFRA, "-y", *parallel, *INVENTORY_DEPLOY])
            report("idempotent second run (-y)", size, *second)
            dry = timed([PYINFRA, "--dry", "--json", *parallel, *INVENTORY_DEPLOY])
            report("--dry --json, provisioned hosts", size, *dry)
        for size in [int(n) for n in args.dry_hosts.split(",") if n]:
            gpufleet("sandbox", "up", "--hosts", str(size))
            dry = timed([PYINFRA, "--dry", "--json", *parallel, *INVENTORY_DEPLOY])
            report("--dry --json, bare hosts", size, *dry)
    finally:
        gpufleet("sandbox", "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
