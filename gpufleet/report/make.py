"""The fleet report as `gpufleet report` makes it: read the results, then HTML, JSON or a table."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence

from gpufleet.report.fleet import Drift, Fleet, FleetError, load_fleet, summary
from gpufleet.text import cell, plain, redact_data
from gpufleet.validate.baseline import BaselineError
from gpufleet.validate.results import writable_file_problem


def parse_margins(items: Sequence[str]) -> dict[str, float]:
    """``["xla.speedup.amp=0.2"]`` -> ``{"xla.speedup.amp": 0.2}``; BaselineError names a bad
    one."""
    margins = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            margins[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise BaselineError(
                f"--figure-margin {item!r} is not KEY=FRACTION (e.g. xla.speedup.amp=0.2; keys "
                "are the figure's dotted name or WORKLOAD/METRIC, as `gpufleet report --json` "
                "lists them under name and key)"
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

    from gpufleet.report.terminal import STATUS_STYLES

    table = Table(title=cell(f"gpufleet fleet report: {fleet.root}"), title_justify="left")
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
            cell(host.name),
            cell(latest["status"], STATUS_STYLES.get(latest["status"], "")),
            cell(latest["tier"]),
            cell(str(latest["started_at"])[:16].replace("T", " ")),
            f"{counts['pass']}/{counts['fail'] + counts['error']}/{counts['skipped']}",
            cell("\n".join(failing) or (latest["run_error"] or "")[:80]),
            cell("\n".join(r.message for r in host.regressions)),
            cell(drift_text(host.drift)),
        )
    Console().print(table)


def _fail(message: str) -> int:
    print(plain(f"gpufleet report: {message}"), file=sys.stderr)
    return 2


def exit_status(fleet: Fleet) -> int:
    """1 when some host's latest run failed or could not run (exit-code table), else 0."""
    return 1 if any(h.latest["status"] in ("fail", "error") for h in fleet.hosts) else 0


def run(args: argparse.Namespace) -> int:
    """Do what `gpufleet report` was asked; the exit status."""
    if args.html:  # before reading anything: a bad path is the operator's to fix first
        problem = writable_file_problem(args.html, "--html")
        if problem:
            return _fail(problem)
    try:
        margins = parse_margins(args.figure_margin)
        fleet = load_fleet(args.results_dir, margin=args.regression_margin, margins=margins)
    except (FleetError, BaselineError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot read {args.results_dir}: {exc.strerror or exc}")
    figures = [f for host in fleet.hosts for f in host.figures]
    unknown = sorted(set(margins) - {f.key for f in figures} - {f.name for f in figures})
    if unknown:
        known = sorted({f.name for f in figures} | {f.key for f in figures})
        close = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.4)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return _fail(
            f"--figure-margin {', '.join(unknown)}: no host's figures have that key.{hint} "
            f"The keys (dotted name or WORKLOAD/METRIC): "
            f"{', '.join(known) or '(none: no figures yet)'}"
        )
    for host in fleet.hosts:  # say it, even where the table has no room for it
        drift_problem = [host.drift.reason] if host.drift and host.drift.status == "error" else []
        for problem in host.problems + drift_problem:
            print(plain(f"gpufleet report: {host.name}: {problem}"), file=sys.stderr)
    if args.html:
        from gpufleet.report.html import render_html

        try:
            text = render_html(fleet, title=args.title)
        except RuntimeError as exc:  # matplotlib missing
            return _fail(str(exc))
        try:
            args.html.write_text(text, encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            return _fail(f"cannot write --html {args.html}: {exc.strerror or exc}")
    if args.json:
        print(json.dumps(redact_data(summary(fleet)), indent=2))
    else:
        print_fleet(fleet)
        if args.html:
            print(plain(f"HTML report: {args.html}"))
    return exit_status(fleet)
