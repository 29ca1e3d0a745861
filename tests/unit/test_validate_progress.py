"""`gpufleet validate`: progress lines, -q, --list-checks, --select by name, the scheduler key."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet.commands import validate as validate_cmd
from gpufleet.inventory import InventoryHost
from gpufleet.validate import baseline, checks, runner
from gpufleet.validate.progress import Progress, took


def documents(results: Path) -> list[dict[str, Any]]:
    paths = [p for p in results.glob("@local/*.json") if not p.name.startswith("baseline")]
    return [json.loads(p.read_text()) for p in paths]


def test_select_takes_the_names_gpufleet_prints_and_never_joins_a_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review §3 item 11: "host_state::os_supported" gave "pytest exit status 5"; and §2.4
    # item 4: a --select run joined the quick baseline with no figures
    results = tmp_path / "results"
    names = "host_state::os_supported,host_state::nouveau_not_loaded"
    code = validate_cmd.main(["@local", "--results-dir", str(results), "--select", names])
    captured = capsys.readouterr()
    (document,) = documents(results)
    assert [c["name"] for c in document["checks"]] == names.split(",")
    assert code == (0 if document["status"] == "pass" else 1)
    assert document["selection"] == names
    assert not list(results.glob("@local/baseline*"))
    assert "a partial run" in captured.out
    # progress on stderr: a line as the host starts and one as it ends
    assert "[0/1] @local quick started" in captured.err
    assert f"[1/1] @local quick {document['status']} " in captured.err


def test_a_selection_matching_nothing_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    code = validate_cmd.main(
        ["@local", "-q", "--results-dir", str(results), "--select", "nothing_matches"]
    )
    (document,) = documents(results)
    assert code == 2
    assert document["run_error"].startswith("no check matches --select 'nothing_matches'")
    assert "--list-checks" in document["run_error"]
    assert "[1/1]" not in capsys.readouterr().err  # -q: no progress


def test_an_unknown_check_name_is_refused_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    code = validate_cmd.main(
        ["@local", "--results-dir", str(results), "--select", "host_state::os_suported"]
    )
    err = capsys.readouterr().err
    assert code == 2 and not results.exists()
    assert "no quick-tier check has that name" in err
    assert "Did you mean 'host_state::os_supported'?" in err


def test_list_checks_needs_no_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_cmd.main(["--list-checks", "--tier", "full"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "host_state::os_supported" in listed and "workloads::xla" in listed
    assert "workloads::xla" not in checks.list_checks("quick")
    with pytest.raises(SystemExit):
        validate_cmd.main([])  # neither an inventory nor --list-checks


def test_parse_select_tells_names_from_expressions() -> None:
    assert checks.parse_select("host_state::*, workloads::gemm").names == (
        "host_state::*",
        "workloads::gemm",
    )
    assert checks.parse_select("os_supported or nouveau").expression == "os_supported or nouveau"
    assert checks.parse_select(None) == checks.Selection()


def test_parallel_below_one_is_refused() -> None:
    with pytest.raises(SystemExit):
        validate_cmd.build_parser().parse_args(["@local", "--parallel", "0"])


def test_the_scheduler_follows_the_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    # review §2.4 item 1: validate's --scheduler defaulted to none whatever the inventory said
    seen: list[str] = []
    host = InventoryHost("gpu-a", "ssh", "gpu-a", data={"scheduler": "slurm"})
    monkeypatch.setattr(runner, "load_hosts", lambda inventory, limits: [host])

    def fake_run_hosts(args: argparse.Namespace, hosts: Any, run_id: str) -> list[Any]:
        seen.append(args.scheduler)
        return []

    monkeypatch.setattr(runner, "run_hosts", fake_run_hosts)
    for given, wanted in ((None, "slurm"), ("none", "none")):
        args = validate_cmd.build_parser().parse_args(["inv.py", "-q"])
        args.scheduler = given
        runner.run(args)
        assert seen[-1] == wanted


def test_progress_lines_and_heartbeat() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = Progress(2, "quick", out=out, clock=lambda: now[0])
    progress.started("gpu-07")
    now[0] = 41.0
    progress.heartbeat()
    progress.finished("gpu-07", "pass")
    progress.finished("gpu-08", "error", "could not reach gpu-08\nmore")
    assert out.getvalue().splitlines() == [
        "[0/2] gpu-07 quick started",
        "[0/2] still running: gpu-07 41 s",
        "[1/2] gpu-07 quick pass 41 s",
        "[2/2] gpu-08 quick error 0 s (could not reach gpu-08)",
    ]
    assert (took(581), took(3720)) == ("9m41s", "1h02m")


def test_a_run_without_a_baseline_figure_does_not_join(tmp_path: Path) -> None:
    from tests.unit import fleet_factory as ff

    path = tmp_path / "baseline.json"
    first = ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads())
    assert baseline.add_run(path, first) is not None
    fewer = ff.document("gpu-a", started_at=ff.when(2), workloads=ff.gpu_workloads()[:1])
    assert baseline.add_run(path, fewer) is None
    assert not baseline.qualifies({**first, "selection": "host_state::*"})


def test_the_fleet_table_gives_a_host_that_could_not_run_its_reason() -> None:
    from rich.console import Console

    from gpufleet.report.schema import new_document
    from gpufleet.report.terminal import fleet_table

    doc = new_document(
        host="gpu-03",
        run_id="r",
        started_at="t",
        tier="quick",
        target="ssh://gpu-03",
        spec={},
        checks=[],
        workloads=[],
        gpu_health=None,
        run_error="could not reach gpu-03: ssh: connect to host gpu-03 port 22: No route\nmore",
    )
    console = Console(width=200, record=True)
    console.print(fleet_table([doc]))
    text = console.export_text()
    assert "reason" in text and "could not reach gpu-03: ssh: connect" in text
    assert "more" not in text
    # review §3 row 5: counted apart from check errors; the results folder is said once, below
    assert "1 of 1 host(s) could not run: no check ran there" in text
    assert "results" not in text


def test_a_junit_path_that_cannot_be_created_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review §3 item 12: found only after the run, naming --results-dir, with no table
    results = tmp_path / "results"
    args = ["@local", "--junit-xml", "/proc/gpufleet-x.xml", "--results-dir", str(results)]
    assert validate_cmd.main(args) == 2
    err = capsys.readouterr().err
    assert "--junit-xml /proc/gpufleet-x.xml cannot be created" in err
    assert "[0/1]" not in err and not list(results.glob("@local/*.json"))


def test_a_junit_write_that_fails_after_the_run_still_shows_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(runs: Any, out: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "merge_junit", broken)
    junit = tmp_path / "j.xml"
    args = ["@local", "-q", "--junit-xml", str(junit), "--results-dir", str(tmp_path / "r")]
    assert validate_cmd.main([*args, "--select", "host_state::os_supported"]) == 2
    captured = capsys.readouterr()
    assert "host_state::os_supported" in captured.out  # the table is shown
    assert f"cannot write {junit}" in captured.err and "check --junit-xml" in captured.err


def test_hosts_refused_for_the_same_reason_share_one_table() -> None:
    # review §3 item 4: one identical error table per host (200 on a real fleet)
    from gpufleet.report.schema import new_document
    from gpufleet.report.terminal import grouped

    def refused(host: str, why: str) -> dict[str, Any]:
        return new_document(
            host=host,
            run_id="r",
            started_at="t",
            tier="quick",
            target=f"ssh://{host}",
            spec={},
            checks=[],
            workloads=[],
            gpu_health=None,
            run_error=why,
        )

    typo = "unknown inventory key 'driver_brnach'. Did you mean 'driver_branch'?"
    docs = [refused("a", typo), refused("b", "could not reach b"), refused("c", typo)]
    shown = grouped(docs)
    assert [d["host"] for d in shown] == ["2 hosts (a, c)", "b"]
    assert shown[0]["run_error"] == typo
