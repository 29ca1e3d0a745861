"""The launcher's remote shell lines, run for real in a local shell: PID file, kill, leftovers."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpufleet.cluster import launcher


def test_the_run_directory_name_is_plain() -> None:
    assert (
        launcher.run_dir("20261201T120000Z-abc123")
        == "/tmp/gpufleet-cluster-20261201T120000Z-abc123"
    )
    with pytest.raises(ValueError):
        launcher.run_dir("x; rm -rf /")


def test_environment_names_are_checked_and_values_quoted() -> None:
    assert launcher.env_prefix({"TF_CONFIG": '{"a": 1}'}) == "env TF_CONFIG='{\"a\": 1}'"
    with pytest.raises(ValueError):
        launcher.env_prefix({"A;B": "1"})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    return status != "Z"


def test_a_background_command_is_recorded_and_ended_with_its_children(tmp_path: Path) -> None:
    directory = str(tmp_path / "run")
    script = launcher.background_script(
        directory, "tf-worker", ["sh", "-c", "sleep 300 & sleep 301; wait"], {"X_MARK": "a b"}
    )
    # sshd gives each command its own session; setsid does the same here.
    proc = subprocess.Popen(["setsid", "sh", "-c", script])
    # Reaped at once, as sshd reaps its session's shell: a zombie would count as alive.
    threading.Thread(target=proc.wait, daemon=True).start()
    pidfile = Path(directory) / "tf-worker.pid"
    for _ in range(50):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    leader = int(pidfile.read_text())
    assert oct(Path(directory).stat().st_mode)[-3:] == "700"
    time.sleep(0.3)
    group = (
        [
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and os.getpgid(int(p.name)) == leader
        ]
        if alive(leader)
        else []
    )
    assert len(group) >= 3  # the shell, sh -c, two sleeps
    subprocess.run(["sh", "-c", launcher.kill_script(f"'{pidfile}'")], check=True, timeout=30)
    proc.wait(timeout=10)
    assert proc.returncode == 128 + 15 or proc.returncode < 0
    assert not [pid for pid in group if alive(pid)]
    assert not pidfile.exists()


def test_an_existing_directory_of_someone_else_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    os.chown(directory, 65534, 65534)  # nobody's, as another user's would be
    script = launcher.background_script(str(directory), "x", ["true"], {})
    proc = subprocess.run(["sh", "-c", script], capture_output=True, timeout=10)
    assert proc.returncode != 0 and not (directory / "x.pid").exists()


def test_the_leftover_check_prints_nothing_when_clean_and_the_listener_otherwise() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        quiet = subprocess.run(
            ["sh", "-c", launcher.leftover_script([port])], capture_output=True, text=True
        )
        assert quiet.stdout == ""
        sock.listen()
        busy = subprocess.run(
            ["sh", "-c", launcher.leftover_script([port])], capture_output=True, text=True
        )
    assert f"listening on {port}:" in busy.stdout
