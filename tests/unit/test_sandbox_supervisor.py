"""The host supervisor: restarts on status 133 (reboot), forwards SIGTERM, stops on other exits."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from gpufleet.sandbox import supervisor

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
        supervisor, "nspawn_command", lambda name, root: [sys.executable, "-c", script, str(arg)]
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
        supervisor, "nspawn_command", lambda n, r: [sys.executable, "-c", "exit(1)"]
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
        for _ in range(100):
            if marker.exists():
                break
            threading.Event().wait(0.05)
        sup.on_sigterm(15, None)

    threading.Thread(target=terminate_once_running).start()
    assert sup.run() == 0
    assert marker.read_text() == "terminated"
    assert (tmp_path / "nspawn.pid").read_text().strip().isdigit()
