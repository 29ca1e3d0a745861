"""One exit-code table (docs/reference/exit-codes.md): report fails with its hosts; drift's 3;
aliases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.commands import matrix as matrix_cmd
from gpufleet.commands import report as report_cmd
from gpufleet.drift.plan import DriftReport, HostDrift
from tests.conftest import REPO_ROOT
from tests.unit import fleet_factory as ff


def fleet(tmp_path: Path, failing: tuple[str, ...] = ()) -> Path:
    root = tmp_path / "results"
    ff.write(root, ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads()))
    doc = ff.document("gpu-b", started_at=ff.when(1), workloads=ff.gpu_workloads(), failing=failing)
    ff.write(root, doc)
    return root


def test_report_exits_1_when_a_host_failed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # review §4.4: `gpufleet report` exited 0 with failing hosts
    passing = fleet(tmp_path / "ok")
    assert report_cmd.main(["--results-dir", str(passing), "--json"]) == 0
    failed = fleet(tmp_path / "bad", failing=("os_supported",))
    capsys.readouterr()
    assert report_cmd.main(["--results-dir", str(failed), "--json"]) == 1
    hosts = {h["host"]: h["status"] for h in json.loads(capsys.readouterr().out)["hosts"]}
    assert hosts == {"gpu-a": "pass", "gpu-b": "fail"}


def test_report_keeps_the_positional_results_dir(tmp_path: Path) -> None:
    root = fleet(tmp_path)
    assert report_cmd.main([str(root), "--json"]) == 0  # the old form, hidden from --help
    with pytest.raises(SystemExit) as info:
        report_cmd.main([str(root), "--results-dir", str(root)])
    assert info.value.code == 2


def test_drift_says_3_for_a_host_it_could_not_reach() -> None:
    def report(*statuses: str) -> int:
        hosts = {f"h{i}": HostDrift(f"h{i}", status=s) for i, s in enumerate(statuses)}
        return DriftReport(hosts, checked_at="t").exit_status

    assert report("clean") == 0 and report("clean", "drift") == 1
    assert report("drift", "unreachable") == 3
    assert report("unreachable", "error") == 2


def test_matrix_old_flag_names_are_hidden_aliases(capsys: pytest.CaptureFixture) -> None:
    assert matrix_cmd.main(["--tf", "2.21.0", "--python", "3.11", "--flavor", "open"]) == 0
    old = capsys.readouterr().out
    new = ["--tf-version", "2.21.0", "--python-version", "3.11", "--kernel-module-flavor", "open"]
    assert matrix_cmd.main(new) == 0
    assert capsys.readouterr().out == old
    text = matrix_cmd.build_parser().format_help()
    assert "--python-version" in text and "--python " not in text and "--flavor " not in text


def test_the_table_is_documented_and_in_the_help() -> None:
    table = (REPO_ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    for row in (
        "| 0 | all good",
        "| 1 | a host failed",
        "| 2 | bad usage",
        "| 3 | could not reach",
    ):
        assert row in table
    for name in ("validate", "drift", "rollout", "report", "matrix", "thresholds", "diagnose"):
        assert f"| `{name}` |" in table
    proc = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert "3 could not reach a host" in " ".join(proc.stdout.split())


def test_an_unknown_figure_margin_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # review §3 item 22: --figure-margin xla=0.2 was accepted and did nothing
    root = fleet(tmp_path)
    assert report_cmd.main(["--results-dir", str(root), "--figure-margin", "xla=0.2"]) == 2
    err = capsys.readouterr().err
    assert "--figure-margin xla: no host's figures have that key" in err
    assert "xla/speedup" in err  # the known keys, named as the option wants them


def test_an_unsupported_connector_names_no_single_subcommand() -> None:
    from gpufleet.inventory import InventoryError, host_from_dict

    with pytest.raises(InventoryError) as info:
        host_from_dict({"name": "@fake/gpu-a", "data": {}})
    assert "not supported by gpufleet (validate, rollout and thresholds" in str(info.value)
