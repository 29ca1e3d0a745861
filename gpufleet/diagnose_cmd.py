"""`gpufleet diagnose`: explain known GPU/CUDA/TensorFlow failure signatures in a log."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from gpufleet.parsers.diagnosis import codes_markdown, diagnose

_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet diagnose",
        description=(
            "Read a log or command output (nvidia-smi, dmesg, apt, dkms, TensorFlow) and explain "
            "every known failure signature in it. Exits 1 when an error is found."
        ),
        epilog="Example: python train.py 2>&1 | gpufleet diagnose -",
    )
    parser.add_argument(
        "file", nargs="?", default="-", help="log file to read; '-' or nothing reads stdin"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--codes", action="store_true", help="list every known code as a Markdown table and exit"
    )
    return parser


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.codes:
        print(codes_markdown(), end="")
        return 0
    try:
        text = _read(args.file)
    except OSError as exc:
        print(
            f"gpufleet diagnose: cannot read {args.file!r}: {exc.strerror}; "
            "give the path of a log file, or '-' to read standard input",
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
            f"[{style}]{finding.severity.upper()}[/] [bold]{finding.code}[/]{seen}: "
            f"{escape(finding.message)}"
        )
        console.print(f"  line {finding.line_number}: {escape(finding.line)}", style="dim")
        console.print(f"  fix: {escape(finding.fix)}")
    return 1 if has_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
