"""`gpufleet validate`: exit codes, expectations, SSH settings, results and JUnit files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpufleet.commands import validate as validate_cmd
from gpufleet.inventory import InventoryError, host_from_dict, parse_debug_inventory
from gpufleet.report.schema import summarize, validate_results
from gpufleet.validate import results, runner
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.ssh import host_block, hostspec_for, ssh_config_text
from tests.unit import fleet_factory as ff

INVENTORIES = Path(__file__).resolve().parent.parent / "fixtures" / "inventories"


def sample_hosts():
    text = (INVENTORIES / "sample.debug-inventory.json").read_text()
    return [host_from_dict(e) for e in parse_debug_inventory(text)]


def doc(status_of_checks=(), run_error=None):
    checks = [
        {"name": f"c{i}", "status": s, "message": "", "figures": {}}
        for i, s in enumerate(status_of_checks)
    ]
    return ff.checks_document(checks, started_at="t", target="local://", run_error=run_error)


def test_exit_status():
    assert results.exit_status([doc(["pass", "skipped"])]) == 0
    # Unproven (a speed check inconclusive) is not a pass: its own exit status, 4 (a soft fail).
    assert results.exit_status([doc(["pass", "skipped", "inconclusive"])]) == 4
    assert results.exit_status([doc(["inconclusive"]), doc(["fail"])]) == 1
    assert results.exit_status([doc(["pass"]), doc(["fail"])]) == 1
    assert results.exit_status([doc(["fail"]), doc(run_error="unreachable")]) == 2
    assert results.exit_status([doc(["error"])]) == 1


def test_exit_status_3_for_a_host_it_could_not_reach():
    # docs/reference/exit-codes.md: 3 is "could not reach", as in drift (it was 2; 3 was unproven)
    down = doc(run_error="could not reach ssh://10.0.0.9: Connection refused")
    assert results.outcome(down) == "unreachable"
    assert results.exit_status([doc(["fail"]), down]) == 3
    assert results.exit_status([doc(["inconclusive"]), down]) == 3
    assert results.exit_status([down, doc(run_error="the suite stopped early")]) == 2


def test_missing_inventory_exits_2(tmp_path, capsys):
    assert validate_cmd.main([str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_empty_inventory_exits_2(tmp_path, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("# no hosts here\n")
    assert validate_cmd.main([str(empty)]) == 2
    assert "yields no hosts" in capsys.readouterr().err


def test_bad_inventory_data_exits_2_and_is_recorded(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("@local", {"tf_versoin": "2.21.0"})]\n')
    results = tmp_path / "results"
    junit = tmp_path / "junit.xml"
    code = validate_cmd.main(
        [str(inventory), "--results-dir", str(results), "--junit-xml", str(junit)]
    )
    assert code == 2
    (path,) = [p for p in results.glob("@local/*.json") if not p.name.startswith("baseline")]
    document = json.loads(path.read_text())
    validate_results(document)
    assert document["status"] == "error" and "Did you mean 'tf_version'" in document["run_error"]
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "tf_versoin" in error.get("message", "")


def test_local_run_end_to_end(tmp_path, capsys):
    """The real pipeline on this machine: pyinfra subprocess, pytest subprocess, testinfra
    local backend, results JSON, merged JUnit XML and the table; two cheap real checks."""
    results = tmp_path / "results"
    junit = tmp_path / "junit.xml"
    code = validate_cmd.main(
        [
            "@local",
            "--results-dir",
            str(results),
            "--junit-xml",
            str(junit),
            "--select",
            "os_supported or nouveau_not_loaded",
        ]
    )
    out = capsys.readouterr().out
    (path,) = [p for p in results.glob("@local/*.json") if not p.name.startswith("baseline")]
    document = json.loads(path.read_text())
    validate_results(document)
    names = [c["name"] for c in document["checks"]]
    assert names == ["host_state::os_supported", "host_state::nouveau_not_loaded"]
    assert code == (0 if document["status"] == "pass" else 1)
    assert document["target"] == "local://" and document["tier"] == "quick"
    assert document["checks"][0]["figures"]["arch"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "@local"
    assert len(suite.findall("testcase")) == 2
    assert "host_state::os_supported" in out and "fleet" in out


def test_expectations_for_local_and_ssh_hosts():
    gpu_a, *_rest, local = sample_hosts()
    exp = runner.expectations_for(gpu_a, tier="full", run_id="r1", python=None, payload_dir=None)
    assert exp["host"] == "gpu-a" and exp["tier"] == "full" and exp["python"] is None
    # What the validation_payload stage installs (validation/ and gpufleet/ under current).
    assert exp["payload_dir"] == "/opt/gpufleet/validation/current"
    # pyinfra's ssh_* and the user's x_ keys stay out of the spec data.
    assert exp["host_data"] == {"driver_branch": 580, "tf_version": "2.21.0"}
    assert exp["target"] == "ssh://ops@10.0.0.5:2222"
    exp = runner.expectations_for(local, tier="quick", run_id="r1", python=None, payload_dir=None)
    assert exp["python"] and exp["payload_dir"] == str(runner.SUITE_DIR.parent)


def test_ssh_config_from_inventory(tmp_path):
    gpu_a, _gpu_b, gpu_c, _local = sample_hosts()
    text = ssh_config_text([("gpufleet-000", gpu_a), ("gpufleet-001", gpu_c)], control_dir=tmp_path)
    block_a = text.split("\nHost ")[1]
    assert "HostName 10.0.0.5" in block_a and "Port 2222" in block_a and "User ops" in block_a
    assert "IdentitiesOnly yes" in block_a and "BatchMode yes" in block_a
    assert "StrictHostKeyChecking accept-new" in block_a
    block_c = text.split("\nHost ")[2]
    assert "HostName gpu-c.example.net" in block_c
    assert "Port" not in block_c and "User" not in block_c


def test_ssh_settings_from_data(tmp_path):
    host = host_from_dict(
        {
            "name": "h",
            "data": {
                "ssh_strict_host_key_checking": "no",
                "ssh_known_hosts_file": "/tmp/kh",
                "_sudo": True,
                "_sudo_user": "ops",
            },
        }
    )
    block = host_block("a", host, tmp_path)
    assert "StrictHostKeyChecking no" in block and "UserKnownHostsFile /tmp/kh" in block
    assert hostspec_for(host, "a") == "ssh://a?sudo=true&sudo_user=ops"
    bad = host_from_dict({"name": "h", "data": {"ssh_strict_host_key_checking": "maybe"}})
    with pytest.raises(InventoryError, match="ssh_strict_host_key_checking='maybe'"):
        host_block("a", bad, tmp_path)


def test_pytest_command(tmp_path):
    gpu_a, *_rest, local = sample_hosts()
    run = HostRun(
        gpu_a, "gpufleet-000", tmp_path / "e", tmp_path / "r", tmp_path / "j", tmp_path / "l"
    )
    command = runner.pytest_command(
        run, tier="quick", run_id="r1", ssh_config=tmp_path / "cfg", select="host_state"
    )
    assert "--hosts=ssh://gpufleet-000" in command
    assert f"--ssh-config={tmp_path / 'cfg'}" in command
    assert command[-2:] == ["-k", "host_state"] and "junit_suite_name=gpu-a" in command
    run.host = local
    command = runner.pytest_command(run, tier="quick", run_id="r1", ssh_config=None)
    assert "--hosts=local://" in command and not any("ssh-config" in c for c in command)


def test_baselines_are_recorded_and_later_runs_compared(tmp_path):
    from rich.console import Console

    from gpufleet.report.terminal import print_report
    from gpufleet.validate.baseline import RUNS_WANTED, baseline_path, load_baseline

    # Acceptance: five passing full runs gather the baseline (run-to-run jitter ~1.5 %).
    jitter = (1.0, 1.015, 0.985, 1.02, 0.98)
    gathering = [
        ff.document("gpu-a", started_at=ff.when(1, hour), workloads=ff.gpu_workloads(scale))
        for hour, scale in enumerate(jitter)
    ]
    quick = ff.document("gpu-b", started_at=ff.when(1), workloads=ff.gpu_workloads(), tier="quick")
    notes = results.baseline_notes(tmp_path, [*gathering, quick])
    assert [n["state"] for n in notes] == ["new"] * 5 + ["new"]
    assert "(5 of 5)" in notes[4]["lines"][0]
    # A quick run gathers the quick tier's own baseline, which wants more runs.
    assert f"(1 of {RUNS_WANTED['quick']})" in notes[5]["lines"][0]
    assert baseline_path(tmp_path, "gpu-b", "quick").is_file()
    assert not baseline_path(tmp_path, "gpu-b").exists()
    for doc in gathering:
        ff.write(tmp_path, doc)

    slower = ff.document("gpu-a", started_at=ff.when(2), workloads=ff.gpu_workloads(scale=0.7))
    same = ff.document("gpu-a", started_at=ff.when(3), workloads=ff.gpu_workloads())
    notes = results.baseline_notes(tmp_path, [slower, same])
    assert notes[0]["state"] == "regressed"
    assert any("30.0 % below the baseline level" in line for line in notes[0]["lines"])
    assert notes[1] == {"state": "ok", "lines": []}
    # The baseline is complete: later runs no longer join it.
    stored = load_baseline(baseline_path(tmp_path, "gpu-a"))
    assert stored is not None
    assert [r["run_id"] for r in stored["runs"]] == [d["run_id"] for d in gathering]

    console = Console(width=200, record=True)
    print_report([{**slower, "_baseline": notes[0]}, {**same, "_baseline": notes[1]}], console)
    text = console.export_text()
    assert f"{len(notes[0]['lines'])} regressed" in text
    assert "30.0 % below" in text


def test_an_unproven_run_never_joins_a_baseline(tmp_path):
    from gpufleet.validate.baseline import baseline_path, qualifies

    doc = ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads())
    doc["checks"][-1]["status"] = "inconclusive"
    doc = {**doc, "status": "unproven", "summary": summarize(doc["checks"])}
    validate_results(doc)
    assert not qualifies(doc)
    assert results.baseline_notes(tmp_path, [doc]) == [{"state": "none", "lines": []}]
    assert not baseline_path(tmp_path, "gpu-a").exists()
    # Nor does a version-1 document that called such a run "pass".
    assert not qualifies({**doc, "schema_version": 1, "status": "pass"})


def test_unreadable_baseline_is_reported_not_fatal(tmp_path):
    from gpufleet.validate.baseline import baseline_path

    path = baseline_path(tmp_path, "gpu-a")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    doc = ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads())
    (note,) = results.baseline_notes(tmp_path, [doc])
    assert note["state"] == "error" and "delete it" in note["lines"][0]
