"""Where a CI run's time went: its phases, each test tier, the slowest tests, the sandbox's ups.

    python benchmarks/ci_time.py --artifacts .ci-artifacts

Reads what `.ci/run` leaves in its artifacts folder: ``started`` (when the run began),
``phases.tsv`` (name, seconds, exit status of each phase), ``parts.tsv`` and ``junit-*.xml``
(the seconds and the JUnit report of each part of the README's test command, `scripts/test`,
which runs the sandbox-free tiers beside the integration tier) and the sandbox's log of
`gpufleet sandbox up` calls (``/var/lib/gpufleet-sandbox/log/ups.jsonl``, those since the run
began). Prints minutes per phase, per part and per tier (a tier's minutes are the sum of its
tests' times), the slowest 20 tests, and how many sandboxes were brought up with how many bare
hosts (each one a first deploy to come) against hosts booted on a
snapshot. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

UPS_LOG = Path("/var/lib/gpufleet-sandbox/log/ups.jsonl")
TIERS = ("unit", "operations", "workloads", "integration")


def read_phases(path: Path) -> list[tuple[str, float, int]]:
    """(name, seconds, exit status) per phase, in the order they ran."""
    phases = []
    for line in path.read_text().splitlines():
        name, seconds, status = line.split("\t")
        phases.append((name, float(seconds), int(status)))
    return phases


def read_tests(junit: Path) -> list[tuple[str, float, str]]:
    """(test id, seconds, outcome) for every test case of a JUnit report."""
    tests = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        tests.append((name, float(case.get("time", 0.0)), outcome))
    return tests


def tier_of(test_id: str) -> str:
    """The tier a test belongs to, from its module path (tests.<tier>.test_x)."""
    parts = test_id.split("::", 1)[0].split(".")
    return parts[1] if len(parts) > 1 and parts[1] in TIERS else "other"


def read_ups(path: Path, since: float) -> list[dict]:
    if not path.is_file():
        return []
    ups = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [up for up in ups if up.get("at", 0) >= since]


def report(artifacts: Path, ups_log: Path = UPS_LOG) -> str:
    lines = []
    phases_file = artifacts / "phases.tsv"
    phases = read_phases(phases_file) if phases_file.is_file() else []
    if phases:
        lines.append(f"{'phase':24} {'minutes':>8}  exit")
        for name, seconds, status in phases:
            lines.append(f"{name:24} {seconds / 60:8.1f}  {status}")
        lines.append(f"{'total':24} {sum(p[1] for p in phases) / 60:8.1f}")
    parts_file = artifacts / "parts.tsv"
    parts = read_phases(parts_file) if parts_file.is_file() else []
    if parts:
        lines.append("")
        lines.append(f"{'part (side by side)':24} {'minutes':>8}  exit")
        for name, seconds, status in parts:
            lines.append(f"{name:24} {seconds / 60:8.1f}  {status}")
    tests = [test for junit in sorted(artifacts.glob("junit*.xml")) for test in read_tests(junit)]
    if tests:
        per_tier: dict[str, list[float]] = defaultdict(list)
        outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for name, seconds, outcome in tests:
            per_tier[tier_of(name)].append(seconds)
            outcomes[tier_of(name)][outcome] += 1
        lines.append("")
        lines.append(f"{'tier':24} {'minutes':>8} {'tests':>6}  outcomes")
        for tier in (*TIERS, "other"):
            if tier in per_tier:
                counts = ", ".join(f"{n} {k}" for k, n in sorted(outcomes[tier].items()))
                minutes = sum(per_tier[tier]) / 60
                lines.append(f"{tier:24} {minutes:8.1f} {len(per_tier[tier]):6}  {counts}")
        lines.append("")
        lines.append("slowest 20 tests (seconds, setup and teardown included):")
        for name, seconds, outcome in sorted(tests, key=lambda t: -t[1])[:20]:
            lines.append(f"{seconds:8.1f}  {name}{'' if outcome == 'passed' else f' ({outcome})'}")
    started = artifacts / "started"  # the run's start, seconds since the epoch (.ci/run)
    ups = read_ups(ups_log, float(started.read_text()) if started.is_file() else 0.0)
    if ups:
        bare = sum(len(up["bare"]) for up in ups)
        booted = sum(up["hosts"] for up in ups)
        lines.append("")
        lines.append(
            f"sandbox: {len(ups)} up(s), {booted} host(s): {bare} bare (a first deploy each, "
            f"when deployed), {booted - bare} on a snapshot; "
            f"{sum(up['seconds'] for up in ups) / 60:.1f} min in `up`"
        )
    return "\n".join(lines) if lines else f"nothing to report in {artifacts}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--artifacts", type=Path, default=Path(".ci-artifacts"))
    parser.add_argument("--ups-log", type=Path, default=UPS_LOG)
    args = parser.parse_args()
    print(report(args.artifacts, args.ups_log))


if __name__ == "__main__":
    main()
