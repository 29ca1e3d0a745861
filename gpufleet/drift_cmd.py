"""`gpufleet drift INVENTORY`: what differs from the declared state, host by host.

Example::

    gpufleet drift inventories/prod.py                  # plan + quick validation tier
    gpufleet drift inventories/sandbox.py --no-validation --json
    gpufleet drift inventories/prod.py --results-dir results/   # also DIR/<host>/drift.json

Exit status: 0 every host is as declared, 1 some host drifted (a pending change or a failed
quick check), 2 some host could not be checked (unreachable, failed while planning, bad
inventory), with the reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpufleet.drift import DEFAULT_DEPLOY, DriftError, DriftReport, build_report, run_plan
from gpufleet.inventory import InventoryError, read_debug_inventory

STATUS_STYLE = {"clean": "green", "drift": "yellow", "unreachable": "red", "error": "red"}


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
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
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


def inventory_hosts(inventory: str, limits: Sequence[str]) -> list[str]:
    """The inventory's host names (after ``--limit``); InventoryError when there are none."""
    entries = read_debug_inventory(inventory)
    names = [
        str(entry["name"])
        for entry in entries
        if not limits
        or any(
            fnmatch.fnmatch(candidate, pattern)
            for pattern in limits
            for candidate in (str(entry["name"]), *map(str, entry.get("groups") or ()))
        )
    ]
    if not names:
        every = ", ".join(str(entry["name"]) for entry in entries)
        raise InventoryError(
            f"--limit {' '.join(limits)} matches no host or group; the inventory has: {every}"
        )
    return names


def check(args: argparse.Namespace) -> DriftReport:
    """Read the inventory while pyinfra plans, then validate (if asked) and merge.

    The plan starts at once: reading the inventory takes pyinfra's start-up time too, and a
    bad inventory plans nothing, so the plan is simply dropped then.
    """
    from gpufleet.drift import merge_validation
    from gpufleet.drift_validation import run_validation

    scratch = None
    results_dir = args.results_dir
    if args.validation and results_dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="gpufleet-drift-"))
        results_dir = scratch
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            plan = pool.submit(
                run_plan, args.inventory, args.deploy, limits=args.limit, timeout=args.timeout
            )
            names = inventory_hosts(args.inventory, args.limit)
            validation = (
                pool.submit(run_validation, args.inventory, results_dir, names, limits=args.limit)
                if args.validation
                else None
            )
            report = build_report(names, plan.result())
            if validation is not None:
                outcome = validation.result()
                merge_validation(report, outcome.documents, why_missing=outcome.problem)
            else:
                report.notes.append("quick validation tier not run (--no-validation)")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return report


def write_drift_files(report: DriftReport, results_dir: Path) -> list[Path]:
    """``DIR/<host>/drift.json`` per host, for `gpufleet report`."""
    from gpufleet.validate_cmd import safe_name

    paths = []
    for name, host in report.hosts.items():
        path = results_dir / safe_name(name) / "drift.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        document: dict[str, Any] = {
            "host": name,
            "checked_at": report.checked_at,
            "status": host.status,
            "reason": host.reason,
            "changes": host.changes,
            "conditional": host.conditional,
            "validation_failures": host.validation_failures,
        }
        path.write_text(json.dumps(document, indent=2) + "\n")
        paths.append(path)
    return paths


def print_report(report: DriftReport) -> None:
    """Each host: its status, then what differs, what may differ, and failed quick checks."""
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    for name, host in report.hosts.items():
        console.print(Text.assemble((name, "bold"), "  ", (host.status, STATUS_STYLE[host.status])))
        if host.reason:
            console.print(Text(f"    {host.reason}", style="red"))
        for sentence in host.changes:
            console.print(Text(f"    - {sentence}"))
        for failure in host.validation_failures:
            line = f"    x {failure['check']} ({failure['status']})"
            console.print(Text(line + (f": {failure['message']}" if failure["message"] else "")))
        for sentence in host.conditional:
            console.print(Text(f"    ? {sentence}", style="dim"))
    counts: Mapping[str, int] = {
        status: sum(h.status == status for h in report.hosts.values()) for status in STATUS_STYLE
    }
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    console.print(f"{len(report.hosts)} host(s): {summary}; exit {report.exit_status}")
    for note in report.notes:
        console.print(Text(note, style="dim"))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not Path(args.deploy).is_file():
        print(
            f"gpufleet drift: deploy file {args.deploy!r} does not exist; pass --deploy PATH "
            "(default: deploy/gpu_node.py of this checkout)",
            file=sys.stderr,
        )
        return 2
    args.deploy = str(Path(args.deploy).resolve())
    try:
        report = check(args)
    except (InventoryError, DriftError) as exc:
        print(f"gpufleet drift: {exc}", file=sys.stderr)
        return 2
    if args.results_dir is not None:
        write_drift_files(report, args.results_dir)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report)
    return report.exit_status
