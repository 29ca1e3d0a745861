"""Time `gpufleet diagnose` on hostile long lines (issue 10, finding 19): 1 MiB against 128 KiB.

    .venv/bin/python benchmarks/diagnose_lines.py

Linear time gives a ratio near 8, quadratic near 64. This was a unit test's assertion
(ratio < 24); a wall-clock ratio on a shared machine is a benchmark, so the unit tier counts the
work instead (tests/unit/test_diagnose.py, test_finding_19_*). Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpufleet.parsers import diagnose  # noqa: E402
from tests.unit.test_diagnose import _hostile_line  # noqa: E402


def best_seconds(text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        diagnose(text)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    small, big = _hostile_line(128 * 1024), _hostile_line(1024 * 1024)
    small_s, big_s = best_seconds(small), best_seconds(big)
    ratio = big_s / small_s
    print(json.dumps({"small_s": small_s, "big_s": big_s, "ratio": ratio, "linear": 8}))
    return 0 if ratio < 24 else 1


if __name__ == "__main__":
    sys.exit(main())
