"""`gpufleet sandbox up|status|down|stop|start`: the local fleet of systemd-booted hosts (root)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.commands.common import add_output_flags
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
    # -q, -v and --json go after the action, as on every other subcommand
    flags = argparse.ArgumentParser(add_help=False)
    add_output_flags(flags, "up and status: print the hosts (and services) as JSON")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = sub.add_parser(
        "up", parents=[flags], help="start N hosts (cleaning up an earlier crashed sandbox first)"
    )
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
    up.add_argument(
        "--slurm",
        action="store_true",
        help="also run a Slurm cluster: slurmctld on the first host, slurmd on every host",
    )
    up.add_argument(
        "--from-snapshot",
        metavar="NAME",
        default=None,
        help="boot each host on its disk in snapshot NAME (provisioned hosts in seconds)",
    )
    up.add_argument(
        "--bare",
        action="append",
        metavar="HOST",
        help="with --from-snapshot: HOST starts bare all the same (repeat it)",
    )
    up.add_argument(
        "--pci-record",
        action="append",
        metavar="HOST=NAME",
        help="HOST boots with recorded PCI listing NAME's NVSwitch bridges mounted read-only "
        "over its /sys/bus/pci/devices (gpufleet/sandbox/records/pci; e.g. gfsb-h1=hgx-h100; "
        "repeat it)",
    )
    snap = sub.add_parser(
        "snapshot",
        parents=[flags],
        help="keep the hosts' disks as snapshot NAME (each host reboots once)",
    )
    snap.add_argument("name", help="e.g. provisioned-22.04")
    snap.add_argument(
        "--host", action="append", help="a host to keep (repeat it; default every host)"
    )
    forget = sub.add_parser(
        "forget", parents=[flags], help="delete a snapshot no running host boots on"
    )
    forget.add_argument("name")
    sub.add_parser("status", parents=[flags], help="show the running sandbox's hosts and services")
    sub.add_parser(
        "down",
        parents=[flags],
        help="stop every sandbox process and remove its namespaces and mounts",
    )
    stop = sub.add_parser(
        "stop", parents=[flags], help="power one host off, keeping its disk (start boots it)"
    )
    stop.add_argument("host", help="host name, e.g. gfsb-h2")
    stop.add_argument(
        "--hard",
        action="store_true",
        help="a power cut: kill its supervisor, systemd-nspawn and systemd at once, no shutdown",
    )
    start = sub.add_parser(
        "start", parents=[flags], help="power a stopped host on again and wait for SSH"
    )
    start.add_argument("host", help="host name, e.g. gfsb-h2")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and args.action not in ("up", "status"):
        parser.error(f"--json goes with up or status, not {args.action}")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
