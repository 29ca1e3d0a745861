"""`gpufleet validate INVENTORY`: run the validation suite on every host, write and show results.

Example::

    gpufleet validate inventories/sandbox.py --tier quick --results-dir results/
    gpufleet validate @local --tier quick
    gpufleet validate inventories/fleet.py --calibrate --limit gpu01 --runs 3

Progress goes to stderr, a line per host as it starts and ends (``[12/64] gpu-07 quick pass
41 s``) and a heartbeat every minute; ``-q`` turns it off.

Exit status (docs/reference/exit-codes.md): 0 every host passed, 1 a check failed somewhere, 2 the
inventory is unusable or the suite broke on some host, 3 some host could not be reached, 4
nothing failed but some host is "unproven" (a speed check was inconclusive: a soft fail).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gpufleet.commands.common import add_output_flags
from gpufleet.validate import calibrate, checks
from gpufleet.validate.calibrate import DEFAULT_MARGIN, DEFAULT_RUNS
from gpufleet.validate.runner import run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet validate",
        description="Validate every host of a pyinfra inventory (pytest + testinfra over SSH).",
    )
    parser.add_argument(
        "inventory", nargs="?", help="pyinfra inventory: a file, host names, or @local"
    )
    parser.add_argument(
        "--tier",
        choices=("quick", "full", "cluster"),
        default=None,
        help="quick (default): host checks and the quick workloads with --quick; full: every "
        "workload at size (--calibrate always runs full); cluster: the selected hosts as one "
        "group (network between them, a multi-worker job)",
    )
    parser.add_argument(
        "--cluster-steps", type=int, default=300, metavar="N", help=argparse.SUPPRESS
    )  # the cluster job's training steps (tests make it long enough to interrupt)
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
    parser.add_argument(
        "--parallel",
        type=_positive,
        default=None,
        metavar="N",
        help="hosts at once over SSH (default: every host, up to 64)",
    )
    parser.add_argument(
        "--scheduler",
        choices=("none", "slurm"),
        default=None,
        help="slurm: the suite runs as one exclusive Slurm job per node; failing hosts are "
        "drained, passing ones gpufleet drained resumed (default: the inventory's scheduler "
        "key, else none)",
    )
    slurm = parser.add_argument_group("Slurm jobs", "with --scheduler slurm")
    slurm.add_argument(
        "--dispatch",
        choices=("jobs", "ssh"),
        default="jobs",
        help="jobs (default): sbatch on the nodes, results gathered; ssh: pytest over SSH as "
        "without Slurm, busy hosts run no speed workload (what gpufleet rollout uses)",
    )
    slurm.add_argument("--partition", metavar="NAME", help="default: slurm_partition")
    slurm.add_argument("--reservation", metavar="NAME", help="default: slurm_reservation")
    slurm.add_argument(
        "--constraint", metavar="FEATURES", help="node features (default: slurm_constraint)"
    )
    slurm.add_argument(
        "--slurm-wait",
        type=_positive,
        default=300,
        metavar="S",
        help="seconds a job may wait for its node before it is cancelled: that node did not "
        "run (default 300)",
    )
    parser.add_argument(
        "--select",
        metavar="NAMES|EXPR",
        help="run only these checks, named as gpufleet prints them (host_state::os_supported, "
        "globs and commas allowed), or matching a pytest -k expression; a partial run never "
        "joins a baseline",
    )
    parser.add_argument(
        "--list-checks", action="store_true", help="print the tier's check names and exit"
    )
    add_output_flags(parser, "print a summary per host as JSON, not the tables")
    group = parser.add_argument_group(
        "calibration", "run the full tier on one host you declare healthy and write its floors"
    )
    group.add_argument(
        "--calibrate",
        action="store_true",
        help="write a calibration file (needs exactly one --limit HOST); an inventory's "
        "calibration_file then gives a group of hosts of that kind its floors",
    )
    group.add_argument(
        "--runs", type=int, default=DEFAULT_RUNS, metavar="N", help="full-tier runs (default 3)"
    )
    group.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help="floor = margin x the median of the runs (default 0.9)",
    )
    group.add_argument(
        "--output",
        type=Path,
        metavar="PATH",
        help="where to write it (default: calibration/<model>-<count>x-<interconnect>.toml)",
    )
    group.add_argument("--force", action="store_true", help="overwrite an existing file")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; give 1 or more")
    return value


def _slurm_flags_problem(args: argparse.Namespace) -> str:
    """A partition, reservation or feature flag Slurm could not take as one word, or ""."""
    from gpufleet.spec.checks import value_errors

    keys = {"partition": "slurm_partition", "reservation": "slurm_reservation"}
    keys["constraint"] = "slurm_constraint"
    for flag, key in keys.items():
        value = getattr(args, flag, None)
        errors = value_errors(key, value, str(value)) if value is not None else []
        if errors:
            return f"--{flag}: {errors[0].replace(f'{key} = ', '', 1)}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_checks:
        if args.tier == "cluster":
            parser.error("--list-checks lists the quick and full tiers' checks")
        print("\n".join(checks.list_checks(args.tier or "quick")))
        return 0
    if args.inventory is None:
        parser.error("the inventory is required (a file, host names, or @local)")
    try:
        if args.tier != "cluster":  # the cluster tier's checks are named per link and job
            checks.check_names(checks.parse_select(args.select), args.tier or "quick")
    except checks.SelectError as exc:
        print(f"gpufleet validate: {exc}", file=sys.stderr)
        return 2
    if args.calibrate:
        return calibrate.run(args)
    used = [o for o, v in (("--output", args.output), ("--force", args.force)) if v]
    if used:
        parser.error(f"{', '.join(used)} only go with --calibrate")
    problem = _slurm_flags_problem(args)
    if problem:
        parser.error(problem)
    args.tier = args.tier or "quick"
    if args.tier == "cluster":
        from gpufleet.cluster.run import run as run_cluster

        return run_cluster(args)
    return run(args)
