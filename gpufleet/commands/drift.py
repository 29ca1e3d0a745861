"""`gpufleet drift INVENTORY`: what differs from the declared state, host by host.

Example::

    gpufleet drift inventories/prod.py                  # plan + quick validation tier
    gpufleet drift inventories/sandbox.py --no-validation --json
    gpufleet drift inventories/prod.py --results-dir results/   # also DIR/<host>/drift.json

Exit status (docs/reference/exit-codes.md): 0 every host is as declared, 1 some host drifted
(a pending change or a failed quick check), 2 bad usage or some host could not be checked
(failed while planning, bad inventory), 3 some host could not be reached; each with the reason.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from gpufleet.commands.common import add_output_flags
from gpufleet.drift.check import run
from gpufleet.drift.plan import DEFAULT_DEPLOY


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet drift",
        description="Report, host by host, what the deploy would change and which quick "
        "checks fail. Runs `pyinfra INVENTORY DEPLOY --dry --json`: nothing is changed.",
    )
    parser.add_argument("inventory", help="pyinfra inventory: a file, host names, or @local")
    parser.add_argument(
        "--deploy",
        default=str(DEFAULT_DEPLOY),
        metavar="PATH",
        help="the deploy that declares the state (default: deploy/gpu_node.py)",
    )
    parser.add_argument(
        "--limit", action="append", default=[], metavar="HOST", help="host or group (glob)"
    )
    validation = parser.add_mutually_exclusive_group()
    validation.add_argument(
        "--with-validation",
        dest="validation",
        action="store_true",
        default=True,
        help="also run the quick validation tier and report its failures (default)",
    )
    validation.add_argument(
        "--no-validation", dest="validation", action="store_false", help="plan only"
    )
    add_output_flags(parser, "print a machine-readable report")
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help="write DIR/<host>/drift.json (and keep the validation results there)",
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="limit for the pyinfra plan"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
