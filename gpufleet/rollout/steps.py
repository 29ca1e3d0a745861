"""The real steps of a rollout: pyinfra's deploy, pyinfra's reboot, `gpufleet validate`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gpufleet.commands.common import say_command
from gpufleet.rollout import private
from gpufleet.rollout.machine import Steps
from gpufleet.scheduler.rule import check_node_name
from gpufleet.text import redact

STEP_TIMEOUT_S = 3600


def _pyinfra() -> list[str]:
    return [sys.executable, "-m", "pyinfra"]


def _run(argv: Sequence[str], log: Path, verbose: bool = False) -> tuple[bool, str]:
    say_command(verbose, argv, str(log))
    with private.open_log(log) as out:  # mode 600: --data values may carry a login
        out.write(f"$ {redact(' '.join(argv))}\n")
        out.flush()
        try:
            proc = subprocess.run(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=STEP_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"still running after {STEP_TIMEOUT_S} s (log {log})"
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return False, f"exit {proc.returncode} (log {log}): {' / '.join(tail)[-300:]}"
    return True, ""


def real_steps(
    inventory: str,
    deploy: str,
    *,
    tier: str,
    results_dir: Path,
    log_dir: Path,
    data: Sequence[str] = (),
    select: str | None = None,
    verbose: bool = False,
) -> Steps:
    """Steps that run the deploy, a reboot and the validation gate for one host each."""
    private.private_folder(log_dir)
    extra = [arg for item in data for arg in ("--data", item)]

    def deploy_host(host: str) -> tuple[bool, str]:
        name = check_node_name(host)
        argv = [*_pyinfra(), "-y", inventory, deploy, "--limit", name, *extra]
        return _run(argv, log_dir / f"{name}.deploy.log", verbose)

    def reboot_host(host: str) -> tuple[bool, str]:
        name = check_node_name(host)
        argv = [*_pyinfra(), "-y", inventory, "server.reboot", "--limit", name]
        return _run(argv, log_dir / f"{name}.reboot.log", verbose)

    def validate_host(host: str) -> tuple[bool, str]:
        name = check_node_name(host)
        argv = [
            sys.executable,
            "-m",
            "gpufleet.cli",
            "validate",
            inventory,
            "--limit",
            name,
            "--tier",
            tier,
            "--results-dir",
            str(results_dir),
            "--dispatch",  # a drained host takes no Slurm job: the rollout validates over SSH
            "ssh",
            *(["--select", select] if select else []),
        ]
        return _run(argv, log_dir / f"{name}.validate.log", verbose)

    return Steps(deploy_host, reboot_host, validate_host)
