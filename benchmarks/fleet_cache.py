"""Upstream bytes and wall time of a first deploy of N sandbox hosts, with and without the cache.

    python benchmarks/fleet_cache.py --hosts 1,3          # as root, under /work/sandbox.lock

For each N and each mode: a fresh sandbox of N hosts, then the first deploy (``pyinfra -y
--parallel N``); "cache" puts gfsb-h1 in group gpufleet_cache (GPUFLEET_SANDBOX_CACHE), so N
includes the cache host. Upstream is the stand-in NVIDIA repository and wheel index
(gpufleet.sandbox.upstream's request log): bytes and requests it served during the deploy.
Prints numbers; asserts nothing. Issue 18's goal: with the cache, the upstream bytes of N hosts
within 5 % of those of 1 host.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpufleet.sandbox.inventory import CACHE_ENV  # noqa: E402
from gpufleet.sandbox.serve import request_log  # noqa: E402
from gpufleet.sandbox.state import STATE_DIR  # noqa: E402
from gpufleet.sandbox.upstream import counts  # noqa: E402

PYINFRA = str(Path(sys.executable).with_name("pyinfra"))


def gpufleet(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpufleet.cli", *args], cwd=REPO, check=True)


def served() -> tuple[int, int]:
    """(bytes, requests) the stand-in upstream has served so far."""
    got = counts(request_log(STATE_DIR / "log" / "http-server.log")).values()
    return sum(s.bytes for s in got), sum(s.requests for s in got)


def first_deploy(hosts: int, cache: bool) -> tuple[float, int, int, int]:
    """(wall s, upstream bytes, upstream requests, exit status) of one first deploy."""
    gpufleet("sandbox", "up", "--hosts", str(hosts))
    env = dict(os.environ, **({CACHE_ENV: "gfsb-h1"} if cache else {}))
    bytes_before, requests_before = served()
    started = time.monotonic()
    done = subprocess.run(
        [PYINFRA, "-y", "--parallel", str(hosts), "inventories/sandbox.py", "deploy/gpu_node.py"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    bytes_after, requests_after = served()
    return wall, bytes_after - bytes_before, requests_after - requests_before, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,3", help="fleet sizes (1,3,8 in the issue)")
    parser.add_argument("--modes", default="direct,cache", help="direct, cache or both")
    parser.add_argument(
        "--keep-up",
        action="store_true",
        help="leave the last sandbox up (benchmarks/noop_floor.py)",
    )
    args = parser.parse_args()
    done = False
    print(f"{'hosts':>5}  {'mode':6}  {'wall s':>7}  {'upstream MB':>11}  {'requests':>8}")
    try:
        for hosts in [int(n) for n in args.hosts.split(",") if n]:
            for mode in args.modes.split(","):
                wall, sent, requests, status = first_deploy(hosts, mode == "cache")
                flag = "" if status == 0 else f"  (exit {status})"
                print(
                    f"{hosts:5d}  {mode:6}  {wall:7.1f}  {sent / 1e6:11.1f}  {requests:8d}{flag}",
                    flush=True,
                )
        done = True
    finally:
        if not (done and args.keep_up):
            gpufleet("sandbox", "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
