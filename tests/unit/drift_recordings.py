"""The recorded real pyinfra plan runs (tests/fixtures/drift/recorded), read by the drift tests."""

from __future__ import annotations

import json
from pathlib import Path

from gpufleet.drift.plan import DriftReport, PlanRun, build_report

DRIFT = Path(__file__).resolve().parents[1] / "fixtures" / "drift"
RECORDED = DRIFT / "recorded"
PROBE_DEPLOY = DRIFT / "deploy_probe.py"


def recorded(case: str) -> tuple[list[str], PlanRun]:
    """The inventory's host names and the plan run, as recorded."""
    meta = json.loads((RECORDED / f"{case}.meta.json").read_text())
    run = PlanRun(
        returncode=meta["returncode"],
        stdout=(RECORDED / f"{case}.stdout").read_text(),
        stderr=(RECORDED / f"{case}.stderr").read_text(),
        command=meta["command"],
    )
    return meta["hosts"], run


def report_of(case: str) -> DriftReport:
    hosts, run = recorded(case)
    return build_report(hosts, run, checked_at="2026-11-30T09:00:00+00:00")
