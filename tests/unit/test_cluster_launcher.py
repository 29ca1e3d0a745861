"""The launcher's remote shell lines, run for real in a local shell: PID file, kill, leftovers."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpufleet.cluster import launcher
from tests.waiting import wait_until


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
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def group_members(leader: int) -> list[int]:
    """Live processes of the process group ``leader`` leads."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) == leader and alive(int(entry.name)):
                members.append(int(entry.name))
        except ProcessLookupError:
            continue
    return members


def commands_of(leader: int) -> set[str]:
    """The command lines (argv joined by spaces) of the group's live members."""
    lines = set()
    for pid in group_members(leader):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        lines.add(b" ".join(argv).decode(errors="replace"))
    return lines


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
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the PID file")
    leader = int(pidfile.read_text())
    assert oct(Path(directory).stat().st_mode)[-3:] == "700"
    # The shell, sh -c and its two sleeps, once sh has forked both.
    group = wait_until(
        lambda: commands_of(leader) >= {"sleep 300", "sleep 301"} and group_members(leader),
        "both sleeps in the command's process group",
    )
    assert len(group) >= 3
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

    # No process listed (`true`): this machine's own iperf3 or workers (the integration tier's
    # in CI) are not this test's; the listing is the next test's.
    script = launcher.leftover_script
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        quiet = subprocess.run(
            ["sh", "-c", script([port], processes="true")], capture_output=True, text=True
        )
        assert quiet.stdout == ""
        sock.listen()
        busy = subprocess.run(
            ["sh", "-c", script([port], processes="true")], capture_output=True, text=True
        )
    assert f"listening on {port}:" in busy.stdout


def test_the_leftover_check_names_the_tiers_processes_from_the_listing_it_is_given() -> None:
    lines = ("7 iperf3 -s -p 5201", "8 sshd: root", "9 python -m validation.cluster.worker")
    listing = "printf '%s\\n' " + " ".join(f"'{line}'" for line in lines)
    script = launcher.leftover_script([], processes=listing)
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    assert proc.stdout.splitlines() == [
        "process 7 iperf3 -s -p 5201",
        "process 9 python -m validation.cluster.worker",
    ]


def test_a_command_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    """TensorFlow catches SIGTERM; the clean-up must not stop at asking."""
    directory = str(tmp_path / "run")
    script = launcher.background_script(
        directory, "stubborn", ["sh", "-c", "trap '' TERM; sleep 300 & wait; sleep 300"], {}
    )
    proc = subprocess.Popen(["setsid", "sh", "-c", script])
    threading.Thread(target=proc.wait, daemon=True).start()
    pidfile = Path(directory) / "stubborn.pid"
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the PID file")
    leader = int(pidfile.read_text())
    # Its first sleep runs once the shell has set its TERM trap.
    wait_until(lambda: "sleep 300" in commands_of(leader), "the command's first sleep")
    started = time.monotonic()
    subprocess.run(["sh", "-c", launcher.kill_script(f"'{pidfile}'")], check=True, timeout=30)
    assert time.monotonic() - started >= launcher.TERM_GRACE_S - 0.5  # it asked first
    survivors = group_members(leader)
    assert survivors == []
