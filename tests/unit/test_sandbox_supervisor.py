"""The host supervisor: restarts on status 133 (reboot), forwards SIGTERM, stops on other exits."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from gpufleet.sandbox import supervisor
from tests.waiting import wait_until

# Stands in for systemd-nspawn: counts its boots in a file, asks for a "reboot" (status 133)
# until the third boot, then exits with status 0 (a poweroff from inside).
REBOOTING = """
import pathlib, sys
counter = pathlib.Path(sys.argv[1])
boots = int(counter.read_text() or 0) + 1 if counter.exists() else 1
counter.write_text(str(boots))
sys.exit(133 if boots < 3 else 0)
"""

# Runs until SIGTERM, then records that it was asked to shut down and exits 0.
WAITING = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (marker.write_text("terminated"), sys.exit(0)))
marker.write_text("running")
time.sleep(30)
sys.exit(3)
"""


def _fake_nspawn(monkeypatch: pytest.MonkeyPatch, script: str, arg: Path) -> None:
    monkeypatch.setattr(
        supervisor,
        "nspawn_command",
        lambda name, root, pci=None: [sys.executable, "-c", script, str(arg)],
    )


def test_reboot_status_boots_the_host_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    counter = tmp_path / "boots"
    _fake_nspawn(monkeypatch, REBOOTING, counter)
    sup = supervisor.Supervisor("gfsb-h1", tmp_path, tmp_path / "nspawn.pid")
    sup.preexec = None  # no time namespace for the stand-in (that needs root)
    assert sup.run() == 0
    assert counter.read_text() == "3"  # two reboots, then a poweroff ends supervision


def test_other_exit_status_ends_supervision(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        supervisor, "nspawn_command", lambda n, r, pci=None: [sys.executable, "-c", "exit(1)"]
    )
    sup = supervisor.Supervisor("gfsb-h1", tmp_path, tmp_path / "nspawn.pid")
    sup.preexec = None  # no time namespace for the stand-in (that needs root)
    assert sup.run() == 1


def test_sigterm_is_forwarded_and_ends_supervision(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    _fake_nspawn(monkeypatch, WAITING, marker)
    sup = supervisor.Supervisor("gfsb-h1", tmp_path, tmp_path / "nspawn.pid")
    sup.preexec = None  # no time namespace for the stand-in (that needs root)

    def terminate_once_running() -> None:
        # No cap short of a hang: a loaded machine may take seconds to start the child's Python.
        wait_until(marker.exists, "the stand-in nspawn's TERM handler", timeout=300)
        sup.on_sigterm(15, None)

    threading.Thread(target=terminate_once_running).start()
    assert sup.run() == 0
    assert marker.read_text() == "terminated"
    assert (tmp_path / "nspawn.pid").read_text().strip().isdigit()


def test_a_namespace_init_is_told_from_its_status() -> None:
    from gpufleet.sandbox import leader

    assert leader.is_namespace_init("Name:\tsystemd\nNSpid:\t4242\t1\n")
    assert not leader.is_namespace_init("Name:\tsshd\nNSpid:\t4250\t57\n")
    assert not leader.is_namespace_init("Name:\tbash\nNSpid:\t77\n")  # this machine's own


def test_a_recorded_leader_counts_only_while_that_very_process_runs(tmp_path: Path) -> None:
    import subprocess

    from gpufleet.sandbox import leader

    child = subprocess.Popen(["sleep", "30"])
    record = tmp_path / leader.LEADER_FILE
    try:
        leader.record(record, child.pid)
        assert leader.recorded(record) == child.pid
        pid, start = record.read_text().split()
        record.write_text(f"{pid} {int(start) + 1}\n")  # the same PID, another process
        assert leader.recorded(record) is None
    finally:
        child.kill()
        child.wait()
    leader.record(record, child.pid)
    assert leader.recorded(record) is None


def test_each_host_gets_cgroups_of_its_own(tmp_path: Path) -> None:
    """On a hybrid machine: the named systemd hierarchy and the unified one (stand-in tree)."""
    from gpufleet.sandbox import cgroups

    for hierarchy in ("systemd", "unified"):
        (tmp_path / hierarchy).mkdir()
        (tmp_path / hierarchy / "cgroup.procs").write_text("")
    made = cgroups.prepare("gfsb-h2", tmp_path)
    assert made == [
        tmp_path / "systemd/gpufleet-sandbox/gfsb-h2",
        tmp_path / "unified/gpufleet-sandbox/gfsb-h2",
    ]
    assert all(path.is_dir() for path in made)
    (made[0] / "payload").mkdir()
    cgroups.remove_tree(made[0])
    assert not made[0].exists()
