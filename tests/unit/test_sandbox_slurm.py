"""The sandbox's Slurm cluster files: slurm.conf, gres.conf, munge key, stand-in GPU devices."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from gpufleet.operations import apt_bounded
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


def _update_loop(script: str) -> str:
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("for try"))
    return "\n".join(lines[start : lines.index("done", start) + 1]) + "\necho installed\n"


@pytest.mark.parametrize("fails", [1, 2])
def test_apt_update_is_bounded_and_tried_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: int
) -> None:
    """6 hosts at once: apt-cacher-ng failed one host's InRelease and its apt-get update
    waited 10 minutes. Now each try is killed at its bound, and a failed one is tried again."""
    monkeypatch.setattr(slurm, "APT_LOG", str(tmp_path / "apt.log"))
    script = slurm.install_script(False)
    # the deploy's bounded update (gpufleet.operations.apt_bounded), with the sandbox's bounds
    assert shlex.quote(apt_bounded.UPDATE) in script
    bounds = f"gpufleet-apt-update {slurm.APT_REQUEST_TIMEOUT_S} {slurm.APT_UPDATE_TIMEOUT_S} "
    assert bounds in script
    assert 'timeout --kill-after=10 "$2" apt-get update -o Acquire::http::Timeout="$1"' in script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "timeout").write_text('#!/bin/sh\necho "$@" >> "$CALLS"\nshift 2\nexec "$@"\n')
    (bin_dir / "apt-get").write_text(
        '#!/bin/sh\nn=$(wc -l < "$CALLS")\n[ "$n" -gt "$FAILS" ] || { echo E: acng; exit 100; }\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "FAILS": str(fails)}
    proc = subprocess.run(
        ["sh", "-c", "set -e\n" + _update_loop(script)], env=env, capture_output=True, text=True
    )
    assert len(calls.read_text().splitlines()) == 2
    if fails == 1:
        assert proc.returncode == 0 and proc.stdout.strip() == "installed", proc
    else:
        assert proc.returncode == 1 and "failed twice" in proc.stdout and "E: acng" in proc.stdout


def test_the_controller_installs_alone_before_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    state = sandbox(4)
    events: list[str] = []
    lock = threading.Lock()

    def install(host: HostState, is_controller: bool, state_dir: Path) -> str | None:
        with lock:
            # the controller's install runs on its own, not in the pool beside the others
            alone = threading.current_thread() is threading.main_thread()
            events.append(f"start {host.name} {is_controller} {'alone' if alone else 'pool'}")
        with lock:
            events.append(f"end {host.name}")
        return None

    monkeypatch.setattr(slurm, "push_files", lambda state, state_dir: None)
    monkeypatch.setattr(slurm, "wait_ready", lambda state, state_dir: None)
    monkeypatch.setattr(slurm, "_install", install)
    slurm.setup(state, Path("/nonexistent"), log=lambda _line: None)
    assert events[:2] == ["start gfsb-h1 True alone", "end gfsb-h1"]
    assert sorted(e for e in events[2:] if e.startswith("start")) == [
        f"start gfsb-h{i} False pool" for i in (2, 3, 4)
    ]


def test_a_failed_controller_install_stops_before_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    monkeypatch.setattr(slurm, "push_files", lambda state, state_dir: None)
    monkeypatch.setattr(
        slurm, "_install", lambda host, ctl, state_dir: started.append(host.name) or "broken"
    )
    with pytest.raises(slurm.SandboxError, match="broken"):
        slurm.setup(sandbox(3), Path("/nonexistent"), log=lambda _line: None)
    assert started == ["gfsb-h1"]


def test_an_install_past_its_limit_is_a_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run_on(*args: object, timeout: float = 0, **kwargs: object) -> None:
        raise subprocess.TimeoutExpired("ssh", timeout)

    monkeypatch.setattr(slurm, "run_on", run_on)
    why = slurm._install(sandbox(1).hosts[0], True, Path("/state"))
    assert why is not None and why.startswith("gfsb-h1: installing Slurm did not finish within")
    assert "/state/log/apt-cacher-ng" in why


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
