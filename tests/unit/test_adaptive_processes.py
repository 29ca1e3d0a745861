"""Processes added while a speed verdict is inconclusive, up to the tier's budget (review 2, N2)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from tests.unit.test_processes import process_doc
from validation import test_workloads
from validation.verdicts.processes import merge_processes, undecided
from validation.verdicts.tiers import PROCESSES


class Host:
    """host.run returning canned workload documents, one per call."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs, self.calls = docs, 0

    def run(self, command: str) -> SimpleNamespace:
        doc = self.docs[self.calls]
        self.calls += 1
        return SimpleNamespace(rc=0, stdout=json.dumps(doc), stderr="")


def test_a_decided_first_process_is_the_only_one() -> None:
    host = Host([process_doc(1.5, seed) for seed in range(5)])
    merged = test_workloads._processes(host, "xla", "cmd", "full", None)
    assert host.calls == 1 and merged["processes"] == 1
    check = next(c for c in merged["checks"] if c["name"] == "xla_speedup")
    assert check["status"] == "pass" and check["judgement"]["processes"] == 1


def test_an_inconclusive_check_adds_processes_up_to_the_budget() -> None:
    # 1.12 against 1.1: one process cannot rule out "no speed-up" at 5 %, three can.
    host = Host([process_doc(1.12, seed) for seed in range(5)])
    merged = test_workloads._processes(host, "xla", "cmd", "full", None)
    assert PROCESSES["full"] == 3 and host.calls == 3
    check = next(c for c in merged["checks"] if c["name"] == "xla_speedup")
    assert check["status"] == "pass", check["reason"]


def test_a_host_below_its_floor_stops_at_the_budget_unproven_or_failed() -> None:
    host = Host([process_doc(1.07, seed) for seed in range(5)])
    merged = test_workloads._processes(host, "xla", "cmd", "full", None)
    assert host.calls == PROCESSES["full"]
    assert merged["verdict"]["status"] in ("inconclusive", "fail")


def test_the_looks_share_alpha_and_busy_checks_ask_for_no_process() -> None:
    one = merge_processes([process_doc(1.12, 0)], looks=3)
    assert undecided(one)
    busy = {
        "workload": "xla",
        "checks": [{"name": "s", "status": "inconclusive", "reason": "busy"}],
    }
    assert not undecided(busy)
