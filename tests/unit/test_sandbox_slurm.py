"""The sandbox's Slurm cluster files: slurm.conf, gres.conf, munge key, stand-in GPU devices."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpufleet.sandbox import slurm
from gpufleet.sandbox.state import HostState, SandboxState


def sandbox(n: int = 3) -> SandboxState:
    hosts = [HostState(f"gfsb-h{i}", f"10.231.7.{10 + i}") for i in range(1, n + 1)]
    return SandboxState(image="ubuntu22.04", os=["ubuntu", "22.04"], hosts=hosts)


def test_slurm_conf_controller_nodes_and_nspawn_plugins() -> None:
    text = slurm.slurm_conf(sandbox())
    assert "SlurmctldHost=gfsb-h1(10.231.7.11)\n" in text
    for line in ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "GresTypes=gpu"):
        assert f"{line}\n" in text
    assert text.count("NodeName=") == 3
    assert "NodeName=gfsb-h3 NodeAddr=10.231.7.13 CPUs=2 Gres=gpu:2 State=UNKNOWN\n" in text
    assert "HealthCheckProgram" not in text  # the scheduler_integration stage sets it


def test_gres_conf_names_the_stand_in_devices() -> None:
    assert slurm.gres_conf(sandbox()).splitlines()[-1] == (
        "NodeName=gfsb-h1,gfsb-h2,gfsb-h3 Name=gpu File=/var/lib/gpufleet-sandbox-gpus/nvidia[0-1]"
    )


def test_only_the_first_host_installs_slurmctld() -> None:
    assert "slurmctld" in slurm.install_script(True)
    assert "slurmctld" not in slurm.install_script(False)
    assert "install -o munge -g munge -m 400" in slurm.install_script(False)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of the stand-in devices needs root")
def test_push_files_writes_key_devices_and_hosts(tmp_path: Path) -> None:
    state = sandbox(2)
    for host in state.hosts:
        (tmp_path / "hosts" / host.name / "root").mkdir(parents=True)
    slurm.push_files(state, tmp_path)
    key = tmp_path / "slurm" / "munge.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 1024
    root = tmp_path / "hosts/gfsb-h2/root"
    staged = root / slurm.STAGED_KEY.lstrip("/")
    assert staged.read_bytes() == key.read_bytes()
    assert stat.S_IMODE(staged.stat().st_mode) == 0o600
    device = (root / "var/lib/gpufleet-sandbox-gpus/nvidia1").stat()
    assert stat.S_ISCHR(device.st_mode) and os.major(device.st_rdev) == 195
    assert os.minor(device.st_rdev) == 1
    assert "10.231.7.11 gfsb-h1" in (root / "etc/hosts").read_text()
    # a second push (another `up`) keeps the sandbox's key
    slurm.push_files(state, tmp_path)
    assert staged.read_bytes() == key.read_bytes()
