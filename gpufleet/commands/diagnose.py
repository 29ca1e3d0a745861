"""`gpufleet diagnose`: explain known GPU/CUDA/TensorFlow failure signatures in a log."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.commands.common import add_output_flags
from gpufleet.diagnose import run

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
    add_output_flags(parser, "print the findings as JSON")
    parser.add_argument(
        "--codes", action="store_true", help="list every known code as a Markdown table and exit"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    raise SystemExit(main())
