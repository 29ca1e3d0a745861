"""The results JSON document: assembly, derived fields, and the shape check."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpufleet.report.schema import (
    ResultsSchemaError,
    new_document,
    overall_status,
    summarize,
    validate_results,
)
from gpufleet.report.terminal import format_figure, format_figures, host_table

WORKLOAD = {
    "workload": "xla",
    "schema_version": 1,
    "metrics": {"speedup": 1.26},
    "verdict": {"status": "not_applicable", "reason": "no GPU"},
}


def document(**overrides):
    checks = [
        {"name": "host_state::os_supported", "status": "pass", "message": "", "figures": {}},
        {
            "name": "host_state::driver_loaded",
            "status": "skipped",
            "message": "no NVIDIA kernel module loaded (GPU-less host)",
            "figures": {},
        },
        {"name": "workloads::xla", "status": "inconclusive", "message": "x", "figures": {}},
    ]
    values: dict[str, Any] = dict(
        host="gpu-a",
        run_id="20261130T085000Z-abc123",
        started_at="2026-11-30T08:50:00+00:00",
        tier="quick",
        target="ssh://gpu-a",
        spec={"tf_version": "2.21.0"},
        checks=checks,
        workloads=[WORKLOAD],
        gpu_health=None,
    )
    values.update(overrides)
    return new_document(**values)


def test_new_document_is_valid_and_json_round_trips():
    doc = document()
    validate_results(doc)
    validate_results(json.loads(json.dumps(doc)))
    assert doc["schema_version"] == 3
    assert doc["vendor"] == {"dcgm": None, "nccl_tests": None}
    assert doc["summary"] == {"pass": 1, "fail": 0, "skipped": 1, "error": 0, "inconclusive": 1}
    # Inconclusive is not a pass, and it does not fail the host either: the host is unproven.
    assert doc["status"] == "unproven"


def test_version_1_documents_are_still_read_by_their_own_rule():
    doc = document()
    old = {**doc, "schema_version": 1, "status": "pass"}
    validate_results(old)  # version 1: an inconclusive check left the run "pass"
    with pytest.raises(ResultsSchemaError, match="expected 'unproven'"):
        validate_results({**doc, "status": "pass"})


def test_status_derivation():
    fail = [{"status": "fail"}]
    error = [{"status": "error"}]
    assert overall_status(fail, None) == "fail"
    assert overall_status(error, None) == "fail"
    assert overall_status([], "could not reach gpu-a") == "error"
    assert summarize(fail)["fail"] == 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("run_id"), "missing top-level key 'run_id'"),
        (lambda d: d.update(schema_version=4), "schema_version 4 is not supported"),
        (lambda d: d.pop("vendor"), "missing top-level key 'vendor' \\(schema_version 3\\)"),
        (lambda d: d["vendor"].pop("dcgm"), "vendor: missing 'dcgm'"),
        (lambda d: d.update(tier="medium"), "tier: 'medium' is not one of quick, full"),
        (lambda d: d["checks"][0].update(status="ok"), r"checks\[0\].status: 'ok' is not one of"),
        (lambda d: d["checks"][1].pop("message"), r"checks\[1\]: missing 'message'"),
        (lambda d: d["checks"][0].update(figures=[]), r"checks\[0\].figures: expected dict"),
        (lambda d: d["workloads"][0].pop("verdict"), "not a Workload JSON document"),
        (
            lambda d: d["workloads"][0]["verdict"].update(status="great"),
            "is not pass, fail, inconclusive or not_applicable",
        ),
        (lambda d: d["summary"].update({"pass": 5}), "does not match the checks"),
        (lambda d: d.update(status="fail"), "does not follow from the checks"),
        (lambda d: d.update(duration_s=True), "duration_s: expected .* got a bool"),
        (lambda d: d.update(gpu_health={"gpus": []}), "gpu_health.findings: expected a list"),
        (lambda d: d.update(checks="all good"), "checks: expected list, got str"),
    ],
)
def test_validate_results_names_what_is_wrong(mutate, message):
    doc = copy.deepcopy(document())
    mutate(doc)
    with pytest.raises(ResultsSchemaError, match=message):
        validate_results(doc)


def test_not_a_dict():
    with pytest.raises(ResultsSchemaError, match="document: expected dict"):
        validate_results([])


def test_run_error_document():
    doc = document(checks=[], workloads=[], run_error="could not reach ssh://gpu-a")
    validate_results(doc)
    assert doc["status"] == "error"


def test_terminal_rendering_shows_checks_and_figures():
    from rich.console import Console

    doc = document()
    doc["checks"][0]["figures"] = {"speedup": 1.2634, "speedup_ci": [1.04, 1.62], "ok": True}
    console = Console(width=200, record=True)
    console.print(host_table(doc))
    text = console.export_text()
    assert "host_state::os_supported" in text and "speedup=1.26" in text
    assert "speedup_ci=[1.04, 1.62]" in text and "ok=true" in text
    assert "no NVIDIA kernel module loaded (GPU-less host)" in text
    assert "1 pass, 1 skipped, 1 inconclusive" in text


def test_format_figures_limits_and_compacts():
    assert format_figure(0.000123456) == "0.000123"
    assert format_figure({"a": 1}) == "1 entries"
    assert format_figure(list(range(9))) == "9 items"
    assert format_figures({f"k{i}": i for i in range(6)}).endswith("(+2 more)")
