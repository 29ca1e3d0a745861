"""What `gpufleet diagnose` prints: the known failures found in a log, each with its fix."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.text import Text

from gpufleet.parsers.diagnosis import codes_markdown, diagnose
from gpufleet.text import cell, plain

_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _read(path: str) -> str:
    if path == "-":  # bytes, decoded as files are: a log's stray bytes must not stop it
        buffer = getattr(sys.stdin, "buffer", None)  # None: stdin replaced by a text stream
        return buffer.read().decode("utf-8", "replace") if buffer else sys.stdin.read()
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def run(args: argparse.Namespace) -> int:
    if args.codes:
        print(codes_markdown(), end="")
        return 0
    try:
        text = _read(args.file)
    except OSError as exc:
        print(
            plain(
                f"gpufleet diagnose: cannot read {args.file!r}: {exc.strerror}; "
                "give the path of a log file, or '-' to read standard input"
            ),
            file=sys.stderr,
        )
        return 2

    findings = diagnose(text)
    has_error = any(finding.severity == "error" for finding in findings)
    if args.json:
        print(json.dumps([finding.to_dict() for finding in findings], indent=2))
        return 1 if has_error else 0

    console = Console(soft_wrap=True)  # no hard wraps: output is often piped into logs
    if not findings:
        console.print("No known failure signature found.")
        return 0
    for finding in findings:
        style = _STYLES[finding.severity]
        seen = f" (x{finding.count})" if finding.count > 1 else ""
        console.print(
            Text.assemble(
                cell(finding.severity.upper(), style),
                " ",
                cell(finding.code, "bold"),
                f"{seen}: ",
                cell(finding.message),
            )
        )
        # The line is the log's own text: shown literally, without its control characters.
        console.print(cell(f"  line {finding.line_number}: {finding.line}", "dim"))
        console.print(cell(f"  fix: {finding.fix}"))
    return 1 if has_error else 0
