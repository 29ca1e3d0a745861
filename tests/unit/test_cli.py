"""The `gpufleet` command dispatches to its subcommands and explains what it cannot do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet import cli


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in cli.SUBCOMMANDS:
        assert name in out


def test_no_subcommand_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: gpufleet" in capsys.readouterr().out


def test_unknown_subcommand_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_subcommand_without_module_says_not_yet_available(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.SUBCOMMANDS, "later", ("gpufleet.no_such_module", "a later feature"))
    assert cli.main(["later"]) == 2
    assert "not yet available" in capsys.readouterr().err


def test_console_script_help_does_not_import_tensorflow_or_gevent() -> None:
    code = (
        "import sys; from gpufleet import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('tensorflow', 'gevent', 'pyinfra_cli') if m in sys.modules]\n"
        "print('LOADED', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED []" in out.stdout


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    # `gpufleet thresholds ... | head -1`: head exits after one line, the rest of the table
    # meets a closed pipe. Repeated so the output is far larger than the pipe's buffer.
    command = (
        f"for i in 1 2 3 4 5 6 7 8; do {sys.executable} -m gpufleet.cli thresholds "
        "--gpu-model 'NVIDIA A100-SXM4-40GB' --gpu-count 8 --interconnect nvswitch; done "
        "| head -1"
    )
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
