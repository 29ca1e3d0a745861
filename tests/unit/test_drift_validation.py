"""`gpufleet drift`'s validation half and its output files: results documents merged into the
drift report, the run id, and the drift.json the fleet report reads."""

from __future__ import annotations

import json
from typing import Any

from gpufleet.drift import check as drift_check
from gpufleet.drift.plan import DriftReport, HostDrift, merge_validation
from gpufleet.drift.validation import read_documents, run_id_of, validate_command
from gpufleet.report.fleet import read_drift
from gpufleet.validate.baseline import safe_name
from tests.unit import fleet_factory as ff
from tests.unit.drift_recordings import RECORDED, report_of

# --- validation merge --------------------------------------------------------------------


def results(host: str, checks: list[dict[str, Any]], run_error: str | None = None) -> dict:
    return ff.checks_document(
        checks,
        host=host,
        run_id="20261130T090000Z-abc123",
        started_at="2026-11-30T09:00:00+00:00",
        run_error=run_error,
    )


def check(name: str, status: str, message: str = "") -> dict[str, Any]:
    return {"name": name, "status": status, "message": message, "figures": {}}


def test_merge_validation_failures_clean_errors_and_unreachable():
    report = DriftReport(
        hosts={name: HostDrift(name=name) for name in ("ok", "fails", "broke", "none", "down")},
        checked_at="",
    )
    report.hosts["down"].status, report.hosts["down"].reason = "unreachable", "Could not connect"
    documents = {
        "ok": results("ok", [check("host_state::driver", "pass")]),
        "fails": results(
            "fails",
            [
                check("host_state::nouveau_not_loaded", "fail", "nouveau is loaded"),
                check("gpu_health::ecc", "pass"),
                check("workloads::xla", "error", "ptxas not found"),
            ],
        ),
        "broke": results("broke", [], run_error="ssh: connection refused"),
        "none": None,
    }
    merge_validation(report, documents, why_missing="no results file")
    assert report.hosts["ok"].status == "clean"
    fails = report.hosts["fails"]
    assert fails.status == "drift"
    assert fails.validation_failures == [
        {
            "check": "host_state::nouveau_not_loaded",
            "status": "fail",
            "message": "nouveau is loaded",
        },
        {"check": "workloads::xla", "status": "error", "message": "ptxas not found"},
    ]
    assert report.hosts["broke"].status == "error"
    assert "ssh: connection refused" in (report.hosts["broke"].reason or "")
    assert report.hosts["none"].reason == "validation left no results: no results file"
    assert report.hosts["down"].reason == "Could not connect"
    assert report.exit_status == 2


def test_validation_run_id_and_documents(tmp_path):
    run_id = "20261130T090000Z-abc123"
    stdout = (
        f"table...\nresults: {tmp_path}/*/{run_id}.json  junit: {tmp_path}/junit/{run_id}.xml\n"
    )
    assert run_id_of(stdout) == run_id
    assert run_id_of("gpufleet validate: inventory file 'x.py' does not exist") is None
    folder = tmp_path / "@ssh%2Fgpu-b"  # gpufleet.validate.baseline.safe_name
    folder.mkdir()
    (folder / f"{run_id}.json").write_text(json.dumps(results("@ssh/gpu-b", [])))
    documents = read_documents(tmp_path, run_id, ["@ssh/gpu-b", "gpu-c"])
    assert documents["@ssh/gpu-b"] is not None and documents["@ssh/gpu-b"]["host"] == "@ssh/gpu-b"
    assert documents["gpu-c"] is None
    command = validate_command("inv.py", tmp_path, ["gpu-*"])
    assert command[2:] == [
        "gpufleet.cli",
        "validate",
        "inv.py",
        "--tier",
        "quick",
        "--results-dir",
        str(tmp_path),
        "--limit",
        "gpu-*",
    ]


def test_real_quick_tier_results_merge_into_the_report():
    """`gpufleet validate` on this (GPU-less, unprovisioned) machine, as recorded."""
    stdout = (RECORDED / "validate_local_quick.stdout").read_text()
    run_id = run_id_of(stdout)
    assert run_id == "20261130T090644Z-4010c9"
    documents = read_documents(RECORDED / "validate_local_quick", run_id, ["@local"])
    report = DriftReport(hosts={"@local": HostDrift(name="@local")}, checked_at="")
    merge_validation(report, documents, why_missing="")
    host = report.hosts["@local"]
    assert host.status == "drift"
    assert [f["check"] for f in host.validation_failures] == [
        "host_state::driver_packages_locked",
        "host_state::cuda_stack_packages_pinned",
        "host_state::unattended_upgrades_blacklist",
    ]
    assert host.validation_failures[0]["message"].startswith("not installed: nvidia-open")


# --- output files ------------------------------------------------------------------------


def test_drift_json_is_what_the_fleet_report_reads(tmp_path):
    report = report_of("gpu_node_fake_fleet")
    paths = drift_check.write_drift_files(report, tmp_path)
    assert len(paths) == 4
    folder = tmp_path / safe_name("@fake/gpu-unheld-nccl-persistenced-dead")
    read = read_drift(folder / "drift.json")
    assert read is not None
    assert read.changes == ["nvidia-persistenced not running", "libnccl2 no longer held"]
    assert read.status == "drift"
    gone = read_drift(tmp_path / safe_name("@fake/gpu-gone") / "drift.json")
    assert gone is not None and gone.status == "error"
    assert "no NVIDIA GPU on the PCI bus" in gone.reason
    document = json.loads((folder / "drift.json").read_text())
    assert document["host"] == "@fake/gpu-unheld-nccl-persistenced-dead"
    assert document["status"] == "drift"
    assert document["checked_at"] == "2026-11-30T09:00:00+00:00"


def test_report_json_shape():
    document = report_of("local_and_unreachable").to_dict()
    assert document["exit_status"] == 3
    assert set(document["hosts"]) == {"@local", "127.0.0.1"}
    assert set(document["hosts"]["@local"]) == {
        "status",
        "reason",
        "changes",
        "operations",
        "conditional",
        "validation_failures",
    }
    json.dumps(document)
