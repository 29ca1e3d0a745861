"""`gpufleet report RESULTS_DIR`: the fleet at a glance, in the terminal, as JSON, or as HTML.

Example::

    gpufleet report results/                       # one line per host in the terminal
    gpufleet report results/ --html report.html    # one self-contained file with plots
    gpufleet report results/ --json                # for machines

Exit status (docs/reference/exit-codes.md): 0 the report was made and every host's latest run passed
(or is unproven), 1 some host's latest run failed or could not run (a host whose results files
cannot be read is an `error` row, named on stderr too), 2 the results directory holds nothing
readable to report or an option is unusable (e.g. --html naming a directory).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from gpufleet.commands.common import add_output_flags
from gpufleet.report.make import run
from gpufleet.validate.baseline import DEFAULT_MARGIN


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet report",
        description="Render the results documents of a results directory into a fleet report.",
    )
    # the results directory was positional once: kept, hidden, for one release
    parser.add_argument("old_results_dir", nargs="?", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help="the results directory gpufleet validate wrote (default: ./results)",
    )
    parser.add_argument("--html", type=Path, metavar="PATH", help="write the HTML report here")
    add_output_flags(parser, "print the fleet summary as JSON")
    parser.add_argument(
        "--regression-margin",
        type=float,
        default=DEFAULT_MARGIN,
        metavar="FRACTION",
        help=f"how far a figure may fall below its baseline (default {DEFAULT_MARGIN})",
    )
    parser.add_argument(
        "--figure-margin",
        action="append",
        default=[],
        metavar="KEY=FRACTION",
        help="margin for one figure, by its dotted name or WORKLOAD/METRIC, "
        "e.g. xla.speedup.amp=0.2 (repeatable)",
    )
    parser.add_argument("--title", default="gpufleet report", help="the HTML page's title")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.old_results_dir and args.results_dir:
        parser.error("give the results directory once: --results-dir DIR")
    args.results_dir = args.results_dir or args.old_results_dir or Path("results")
    return run(args)
