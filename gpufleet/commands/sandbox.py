"""`gpufleet sandbox up|status|down`: the local test fleet of systemd-booted hosts (needs root)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.sandbox.control import run
from gpufleet.sandbox.image import IMAGES

EPILOG = """\
Hosts are systemd-nspawn containers booted with systemd, one network namespace each
(gfsb-hN at 10.231.7.(10+N)), reachable only from this machine. They fetch OS packages through
apt-cacher-ng on 10.231.7.1:3142 and stand-in NVIDIA packages and wheels from 10.231.7.1:8631.
Provision them with:  pyinfra -y inventories/sandbox.py deploy/gpu_node.py
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet sandbox",
        description="Bring the local test fleet up or down (needs root).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="start N hosts (cleaning up an earlier crashed sandbox first)")
    up.add_argument("--hosts", type=int, default=3, help="number of hosts (default 3)")
    up.add_argument(
        "--image",
        choices=sorted(IMAGES),
        default=None,
        help="base image; default ubuntu22.04 if Ubuntu's archive answers, else debian12",
    )
    up.add_argument(
        "--no-standins",
        action="store_true",
        help="hosts and apt proxy only: no stand-in NVIDIA repository, wheelhouse or HTTP server",
    )
    sub.add_parser("status", help="show the running sandbox's hosts and services")
    sub.add_parser("down", help="stop every sandbox process and remove its namespaces and mounts")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
