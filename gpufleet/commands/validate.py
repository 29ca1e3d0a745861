"""`gpufleet validate INVENTORY`: run the validation suite on every host, write and show results.

Example::

    gpufleet validate inventories/sandbox.py --tier quick --results-dir results/
    gpufleet validate @local --tier quick

Exit status: 0 every host passed, 1 a check failed somewhere, 2 validation could not run on
some host (bad inventory, unreachable host, the suite broke) or the inventory is unusable,
3 nothing failed but some host is "unproven" (a speed check was inconclusive).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from gpufleet.validate.runner import run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet validate",
        description="Validate every host of a pyinfra inventory (pytest + testinfra over SSH).",
    )
    parser.add_argument("inventory", help="pyinfra inventory: a file, host names, or @local")
    parser.add_argument(
        "--tier",
        choices=("quick", "full"),
        default="quick",
        help="quick: host checks and 4 workloads with --quick; full: all 8 workloads at size",
    )
    parser.add_argument(
        "--limit", action="append", default=[], metavar="HOST", help="host or group (glob)"
    )
    parser.add_argument(
        "--results-dir",
        default="results",
        type=Path,
        metavar="DIR",
        help="results JSON per host per run: DIR/<host>/<run_id>.json (default: ./results)",
    )
    parser.add_argument(
        "--junit-xml", type=Path, metavar="PATH", help="default: DIR/junit/RUN_ID.xml"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="environment Python on the hosts (default: the inventory's env; for @local, "
        "the Python running gpufleet)",
    )
    parser.add_argument(
        "--payload-dir",
        metavar="DIR",
        help="directory on the hosts holding the validation and gpufleet packages (default: "
        "the inventory's payload_dir/current; for @local, this checkout)",
    )
    parser.add_argument("--parallel", type=int, default=4, metavar="N", help="hosts at once")
    parser.add_argument(
        "--scheduler",
        choices=("none", "slurm"),
        default="none",
        help="slurm: no speed workload on hosts running jobs; drain failing hosts, resume "
        "passing ones gpufleet drained",
    )
    parser.add_argument(
        "--select",
        metavar="EXPR",
        help="run only the checks matching a pytest -k expression, e.g. 'host_state'",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
