"""One CLI convention (issue 33 item 4): --json, -q and -v on every subcommand, one meaning each."""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet.cli import SUBCOMMANDS
from gpufleet.commands import common
from gpufleet.commands import sandbox as sandbox_cmd
from gpufleet.inventory import InventoryHost
from gpufleet.rollout import progress as rollout_progress
from gpufleet.rollout import state as st
from gpufleet.validate import suite
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.progress import Progress
from validation.periodic import runner as periodic

# the smallest argv each subcommand's parser takes (what the flags are tried on)
MINIMAL = {
    "validate": ["@local"],
    "drift": ["@local"],
    "rollout": ["inventories/sandbox.py"],
    "report": [],
    "sandbox": ["status"],
    "diagnose": [],
    "matrix": [],
    "thresholds": ["--gpu-model", "A100", "--gpu-count", "8", "--interconnect", "nvswitch"],
}


def parser_of(name: str) -> argparse.ArgumentParser:
    module = importlib.import_module(SUBCOMMANDS[name][0])
    parser: argparse.ArgumentParser = module.build_parser()
    return parser


def option_help(parser: argparse.ArgumentParser, flag: str) -> str:
    actions = [a for a in parser._actions if flag in a.option_strings]
    if not actions:  # sandbox: the flags sit on each action's parser
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return option_help(sub.choices["status"], flag)
    return str(actions[0].help)


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_takes_json_quiet_and_verbose(name: str) -> None:
    parser = parser_of(name)
    assert MINIMAL.keys() == SUBCOMMANDS.keys()
    for flags, wanted in (
        (["--json"], {"json": True}),
        (["-q"], {"quiet": True, "verbose": False}),
        (["--quiet"], {"quiet": True}),
        (["-v"], {"verbose": True, "quiet": False}),
        (["--verbose"], {"verbose": True}),
    ):
        args = vars(parser.parse_args([*MINIMAL[name], *flags]))
        assert {k: args[k] for k in wanted} == wanted, (name, flags)


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_quiet_and_verbose_together_are_bad_usage(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parser_of(name).parse_args([*MINIMAL[name], "-q", "-v"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_quiet_and_verbose_mean_the_same_everywhere() -> None:
    for flag in ("--quiet", "--verbose"):
        helps = {name: option_help(parser_of(name), flag) for name in SUBCOMMANDS}
        assert len(set(helps.values())) == 1, helps


def test_sandbox_json_goes_with_up_or_status_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        sandbox_cmd.main(["down", "--json"])
    assert info.value.code == 2
    assert "--json goes with up or status, not down" in capsys.readouterr().err


def test_verbose_prints_the_command_and_its_log_with_logins_hidden(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["pyinfra", "inv.py", "--data", "mirror=https://ops:s3cret@m.example/x"]
    common.say_command(False, argv, "/tmp/a.log")
    assert capsys.readouterr().err == ""
    common.say_command(True, argv, "/tmp/a.log")
    err = capsys.readouterr().err
    assert err.startswith("$ pyinfra inv.py --data") and err.endswith("(log /tmp/a.log)\n")
    assert "s3cret" not in err


def test_rollout_quiet_prints_no_transition_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    state = st.RolloutState({"gpu-a": st.HostRecord("gpu-a")})
    with rollout_progress.display(state, console, quiet=True) as log:
        log("gpu-a                deploying")
    assert out.getvalue() == ""


def a_run(tmp_path: Path) -> HostRun:
    host = InventoryHost("gpu-07", "local")
    return HostRun(host, "a", tmp_path / "e", tmp_path / "r", tmp_path / "j", tmp_path / "x.log")


def test_heartbeat_names_the_check_a_long_host_is_on(tmp_path: Path) -> None:
    # issue 33 item 3: "a heartbeat on long checks": which check, and for how long
    run = a_run(tmp_path)
    assert suite.current_check(run, now=1000.0) == ""  # no check started yet
    suite.progress_path(run).write_text("workloads::resnet50\n")
    os.utime(suite.progress_path(run), (880.0, 880.0))
    assert suite.current_check(run, now=1000.0) == "workloads::resnet50 2m00s"
    out = io.StringIO()
    clock = iter([0.0, 250.0])
    progress = Progress(
        1,
        "full",
        out=out,
        clock=lambda: next(clock),
        current=lambda name: suite.current_check(run, now=1000.0),
    )
    progress.started("gpu-07", "log /tmp/gpu-07.log")
    progress.heartbeat()
    assert out.getvalue().splitlines() == [
        "[0/1] gpu-07 full started (log /tmp/gpu-07.log)",
        "[0/1] still running: gpu-07 4m10s on workloads::resnet50 2m00s",
    ]


def test_the_suite_is_told_where_to_write_the_check_it_is_on(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    command = suite.pytest_command(run, tier="quick", run_id="r1", ssh_config=None)
    assert f"--progress-file={tmp_path / 'x.check'}" in command


def test_periodic_unproven_is_4_not_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # docs/reference/exit-codes.md: 3 is "could not reach" everywhere; unproven moved to 4
    document = {"status": "unproven", "summary": {"pass": 1}}
    monkeypatch.setattr(periodic, "run", lambda args: (document, tmp_path / "r.json"))
    monkeypatch.setattr(periodic, "publish", lambda document, args: None)
    assert periodic.main(["--out", str(tmp_path)]) == 4
    assert json.dumps(document)  # the document itself is untouched
