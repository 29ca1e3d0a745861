"""The fleet report as `gpufleet report` makes it: read the results, then HTML, JSON or a table."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gpufleet.report.fleet import Drift, Fleet, FleetError, load_fleet, summary
from gpufleet.validate.baseline import BaselineError


def parse_margins(items: Sequence[str]) -> dict[str, float]:
    """``["xla/speedup=0.2"]`` -> ``{"xla/speedup": 0.2}``; BaselineError names a bad one."""
    margins = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            margins[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise BaselineError(
                f"--figure-margin {item!r} is not KEY=FRACTION (e.g. xla/speedup=0.2; keys are "
                "WORKLOAD/METRIC as `gpufleet report --json` lists them)"
            )
    return margins


def drift_text(drift: Drift | None) -> str:
    """The terminal's drift cell: the changes, "none", or why drift could not be checked."""
    if drift is None:
        return "n/a"
    lines = drift.changes + [f"x {failure}" for failure in drift.validation_failures]
    if drift.reason and not lines:
        return f"not checked: {drift.reason}"
    return "\n".join(lines) or "none"


def print_fleet(fleet: Fleet) -> None:
    """One row per host: status, counts, what failed, regressions and drift."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gpufleet.report.terminal import STATUS_STYLES

    table = Table(title=f"gpufleet fleet report: {fleet.root}", title_justify="left")
    table.add_column("host", no_wrap=True)
    for column in ("status", "tier", "last run", "pass/fail/skip", "not passing"):
        table.add_column(column, overflow="fold")
    table.add_column("regressions", overflow="fold", max_width=50)
    table.add_column("drift", overflow="fold", max_width=50)
    for host in fleet.hosts:
        latest = host.latest
        counts = latest["summary"]
        failing = [name for name, c in host.checks.items() if c["status"] in ("fail", "error")]
        table.add_row(
            host.name,
            Text(latest["status"], style=STATUS_STYLES.get(latest["status"], "")),
            latest["tier"],
            str(latest["started_at"])[:16].replace("T", " "),
            f"{counts['pass']}/{counts['fail'] + counts['error']}/{counts['skipped']}",
            "\n".join(failing) or (latest["run_error"] or "")[:80],
            "\n".join(r.message for r in host.regressions),
            drift_text(host.drift),
        )
    Console().print(table)


def run(args: argparse.Namespace) -> int:
    """Do what `gpufleet report` was asked; the exit status."""
    try:
        margins = parse_margins(args.figure_margin)
        fleet = load_fleet(args.results_dir, margin=args.regression_margin, margins=margins)
    except (FleetError, BaselineError) as exc:
        print(f"gpufleet report: {exc}", file=sys.stderr)
        return 2
    if args.html:
        from gpufleet.report.html import render_html

        try:
            text = render_html(fleet, title=args.title)
        except RuntimeError as exc:  # matplotlib missing
            print(f"gpufleet report: {exc}", file=sys.stderr)
            return 2
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(text)
    if args.json:
        print(json.dumps(summary(fleet), indent=2))
    else:
        print_fleet(fleet)
        if args.html:
            print(f"HTML report: {args.html}")
    return 0
