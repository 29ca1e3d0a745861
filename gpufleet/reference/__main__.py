"""`python -m gpufleet.reference [--check]`: write docs/reference/*.md, or say which are stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.reference import DOCS, stale, write


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpufleet.reference",
        description="Regenerate the reference pages in docs/reference/ from the code.",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for name in old:
            print(f"out of date: {DOCS / name} (run: python -m gpufleet.reference)")
        return 1 if old else 0
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
