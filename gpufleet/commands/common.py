"""The flags every subcommand takes, with one meaning each (docs/reference/exit-codes.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from gpufleet.text import plain, redact


def add_output_flags(parser: argparse.ArgumentParser, json_help: str) -> None:
    """``--json`` (what it prints is the subcommand's), ``-q/--quiet`` and ``-v/--verbose``."""
    parser.add_argument("--json", action="store_true", help=json_help)
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress or informational lines on stderr (results, warnings, errors stay)",
    )
    loudness.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the commands gpufleet runs, and where their logs are, on stderr",
    )


def say_command(verbose: bool, argv: Sequence[str], log: str = "") -> None:
    """With ``-v``: ``$ COMMAND`` (logins redacted) and its log file, on stderr."""
    if verbose:
        where = f"  (log {log})" if log else ""
        print(plain(f"$ {redact(shlex.join(argv))}{where}"), file=sys.stderr, flush=True)
