"""The no-op re-run of the whole deploy next to pyinfra's floor on the running sandbox (root).

    python benchmarks/noop_floor.py --hosts 1,3 --repeat 3

On provisioned sandbox hosts (bring them up and deploy first, e.g. with
`benchmarks/sandbox_deploy.py --deploy-hosts 3 --keep-up`), for each host count (``--limit`` to
the first N hosts): the median wall time of ``pyinfra -y inventories/sandbox.py
deploy/gpu_node.py`` (which changes nothing), once with no deploy stamp (every host planned
in full) and once as it runs again (each host's stamp read in one round trip), and of the same
command with benchmarks/empty_deploy.py (no operations: SSH connections, inventory, pyinfra's
own start), and the stamped run's ratio to it (issue 18's target: within 1.5x on 3 hosts).
``--profile`` adds the facts per stage of one no-op run (benchmarks/fact_profile.py). Prints
numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fact_profile  # benchmarks/fact_profile.py, beside this script

from gpufleet.stamp import store

REPO = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
INVENTORY = "inventories/sandbox.py"
DEPLOY = "deploy/gpu_node.py"
FLOOR = "benchmarks/empty_deploy.py"


def wall(args: list[str]) -> float:
    """Seconds one pyinfra run takes; a failed run is reported, not timed."""
    started = time.monotonic()
    done = subprocess.run(
        [PYINFRA, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if done.returncode != 0:
        raise SystemExit(
            f"pyinfra {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}"
        )
    return time.monotonic() - started


def planned_in_full(args: list[str]) -> float:
    """A no-op run with no deploy stamp to use (the folder emptied first, not timed)."""
    shutil.rmtree(store.stamp_dir(), ignore_errors=True)
    return wall(args)


def limits(hosts: int) -> list[str]:
    return [arg for n in range(1, hosts + 1) for arg in ("--limit", f"gfsb-h{n}")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,3", help="host counts (the first N sandbox hosts)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--profile", action="store_true", help="facts per stage of one no-op run")
    args = parser.parse_args()
    # As scripts/bootstrap does: pyinfra's CLI never writes bytecode, so without this every run
    # would compile gpufleet from source (a pip install that is not editable has it compiled).
    for package in ("gpufleet", "validation"):
        compileall.compile_dir(REPO / package, quiet=1)
    print(
        f"{'hosts':>5}  {'planned s':>9}  {'no-op s':>8}  {'floor s':>8}  ratio  "
        "(planned: the deploy stamps removed, every host planned in full)",
        flush=True,
    )
    for hosts in [int(n) for n in args.hosts.split(",") if n]:
        common = ["-y", "--parallel", str(hosts), *limits(hosts), INVENTORY]
        planned = statistics.median(planned_in_full([*common, DEPLOY]) for _ in range(args.repeat))
        wall([*common, DEPLOY])  # leaves each host's stamp, as any run that changes nothing
        # Taken in turns, so that a slow spell of the machine (a VM's stolen time) lands on both.
        pairs = [(wall([*common, DEPLOY]), wall([*common, FLOOR])) for _ in range(args.repeat)]
        noop = statistics.median(pair[0] for pair in pairs)
        floor = statistics.median(pair[1] for pair in pairs)
        print(
            f"{hosts:5d}  {planned:9.2f}  {noop:8.2f}  {floor:8.2f}  {noop / floor:5.2f}x",
            flush=True,
        )
        if args.profile:
            handle, name = tempfile.mkstemp(prefix="gpufleet-facts-", suffix=".json")
            os.close(handle)
            try:
                subprocess.run(
                    [sys.executable, str(Path(__file__).with_name("fact_profile.py")), name,
                     *common, DEPLOY],
                    cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                )  # fmt: skip
                for line in fact_profile.summary(Path(name)):
                    print(line, flush=True)
            finally:
                Path(name).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
