"""Run Slurm's commands on an inventory host over SSH (the controller, or the node itself)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpufleet.inventory import InventoryHost
from gpufleet.scheduler.slurm import COMMAND_TIMEOUT_S, Runner
from gpufleet.validate.ssh import check_ssh_names, ssh_config_text

ALIAS = "gpufleet-slurm"


def ssh_runner(host: InventoryHost, workdir: Path) -> Runner:
    """A Runner for `host`: ``ssh -F <config> <alias> '<quoted argv>'``, with sudo when the
    inventory says ``_sudo``. Each argument is shell-quoted, so a drain reason stays one word.

    ``workdir`` must be a directory only this user can write (the run's own temporary one).
    """
    if host.is_local:

        def local(argv: Sequence[str]) -> tuple[int, str]:
            from gpufleet.scheduler.slurm import local_runner

            return local_runner(argv)

        return local
    check_ssh_names(host)
    config = workdir / "slurm_ssh_config"
    config.write_text(ssh_config_text([(ALIAS, host)], control_dir=workdir))
    config.chmod(0o600)
    sudo = ["sudo", "-n"] if host.data.get("_sudo") else []

    def run(argv: Sequence[str]) -> tuple[int, str]:
        command = shlex.join([*sudo, *argv])
        try:
            proc = subprocess.run(
                ["ssh", "-F", str(config), "-o", "BatchMode=yes", ALIAS, command],
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S + 10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return 124, f"ssh to {host.name} did not answer"
        return proc.returncode, proc.stdout + proc.stderr

    return run
