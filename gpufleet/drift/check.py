"""Drift checking as `gpufleet drift` runs it: plan and validation side by side, then the report."""

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

from rich.text import Text

from gpufleet.commands.common import say_command
from gpufleet.datacheck import host_problems
from gpufleet.drift.plan import (
    DriftError,
    DriftReport,
    build_report,
    merge_validation,
    plan_command,
    run_plan,
)
from gpufleet.drift.validation import run_validation
from gpufleet.inventory import InventoryError, InventoryHost, read_debug_inventory
from gpufleet.text import cell, plain, redact_data
from gpufleet.validate.results import safe_name, writable_dir_problem

STATUS_STYLE = {"clean": "green", "drift": "yellow", "unreachable": "red", "error": "red"}


def inventory_hosts(inventory: str, limits: Sequence[str]) -> list[str]:
    """The inventory's host names (after ``--limit``); InventoryError when there are none."""
    return [str(entry["name"]) for entry in inventory_entries(inventory, limits)]


def data_errors(inventory: str, entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Per host whose inventory data the deploy would refuse, why and where it was set: said as
    that, not as pyinfra's "unreachable" or a line of gpufleet's source."""
    errors = {}
    for entry in entries:
        host = InventoryHost(
            name=str(entry["name"]),
            connector="ssh",
            data=dict(entry.get("data") or {}),
            groups=tuple(str(g) for g in entry.get("groups") or ()),
        )
        found = host_problems(host, inventory)
        if found:
            errors[host.name] = "inventory data: " + "; ".join(
                f"{message} (set in {where})" for message, where in found
            )
    return errors


def inventory_entries(inventory: str, limits: Sequence[str]) -> list[dict[str, Any]]:
    """The inventory's debug-inventory entries (after ``--limit``); InventoryError for none."""
    entries = read_debug_inventory(inventory)
    chosen = [
        entry
        for entry in entries
        if not limits
        or any(
            fnmatch.fnmatch(candidate, pattern)
            for pattern in limits
            for candidate in (str(entry["name"]), *map(str, entry.get("groups") or ()))
        )
    ]
    if not chosen:
        every = ", ".join(str(entry["name"]) for entry in entries)
        raise InventoryError(
            f"--limit {' '.join(limits)} matches no host or group; the inventory has: {every}"
        )
    return chosen


def check(args: argparse.Namespace) -> DriftReport:
    """Read the inventory while pyinfra plans, then validate (if asked) and merge.

    The plan starts at once: reading the inventory takes pyinfra's start-up time too, and a
    bad inventory plans nothing, so the plan is simply dropped then.
    """
    scratch = None
    results_dir = args.results_dir
    if args.validation and results_dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="gpufleet-drift-"))
        results_dir = scratch
    say_command(
        getattr(args, "verbose", False), plan_command(args.inventory, args.deploy, args.limit)
    )
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            plan = pool.submit(
                run_plan, args.inventory, args.deploy, limits=args.limit, timeout=args.timeout
            )
            entries = inventory_entries(args.inventory, args.limit)
            names = [str(entry["name"]) for entry in entries]
            validation = (
                pool.submit(run_validation, args.inventory, results_dir, names, limits=args.limit)
                if args.validation
                else None
            )
            report = build_report(names, plan.result())
            for name, why in data_errors(args.inventory, entries).items():
                report.hosts[name].status, report.hosts[name].reason = "error", why
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
        path.write_text(json.dumps(redact_data(document), indent=2) + "\n")
        paths.append(path)
    return paths


def print_report(report: DriftReport) -> None:
    """Each host: its status, then what differs, what may differ, and failed quick checks."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for name, host in report.hosts.items():
        console.print(
            Text.assemble(cell(name, "bold"), "  ", cell(host.status, STATUS_STYLE[host.status]))
        )
        if host.reason:
            console.print(cell(f"    {host.reason}", "red"))
        for sentence in host.changes:
            console.print(cell(f"    - {sentence}"))
        for failure in host.validation_failures:
            line = f"    x {failure['check']} ({failure['status']})"
            console.print(cell(line + (f": {failure['message']}" if failure["message"] else "")))
        for sentence in host.conditional:
            console.print(cell(f"    ? {sentence}", "dim"))
    counts: Mapping[str, int] = {
        status: sum(h.status == status for h in report.hosts.values()) for status in STATUS_STYLE
    }
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    console.print(cell(f"{len(report.hosts)} host(s): {summary}; exit {report.exit_status}"))
    for note in report.notes:
        console.print(cell(note, "dim"))


def run(args: argparse.Namespace) -> int:
    """Check the hosts ``gpufleet drift`` was given, print or write the report; the exit status."""
    if not Path(args.deploy).is_file():
        print(
            plain(
                f"gpufleet drift: deploy file {args.deploy!r} does not exist; pass --deploy PATH "
                "(default: deploy/gpu_node.py of this checkout)"
            ),
            file=sys.stderr,
        )
        return 2
    if args.results_dir is not None:
        # Refuse an unusable --results-dir now, not after every host has been checked.
        problem = writable_dir_problem(args.results_dir, "--results-dir")
        if problem:
            print(plain(f"gpufleet drift: {problem}"), file=sys.stderr)
            return 2
    args.deploy = str(Path(args.deploy).resolve())
    try:
        report = check(args)
    except (InventoryError, DriftError) as exc:
        print(plain(f"gpufleet drift: {exc}"), file=sys.stderr)
        return 2
    if args.results_dir is not None:
        try:
            write_drift_files(report, args.results_dir)
        except OSError as exc:
            print(
                plain(f"gpufleet drift: cannot write {args.results_dir}: {exc.strerror or exc}"),
                file=sys.stderr,
            )
            return 2
    if args.json:
        print(json.dumps(redact_data(report.to_dict()), indent=2))
    else:
        print_report(report)
    return report.exit_status
