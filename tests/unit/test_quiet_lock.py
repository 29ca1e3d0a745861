"""tests/quiet.py: a measuring test waits for the sandbox-free test in progress, and no new one
starts until it is done (the turnstile), whatever order they come in."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from tests import quiet
from tests.waiting import wait_until


@pytest.fixture(autouse=True)
def _own_lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # This test itself holds the machine's shared lock (tests/conftest.py): its own go here.
    monkeypatch.setattr(quiet, "lock_dir", lambda: tmp_path)


def gate_taken(tmp_path: Path) -> bool:
    """Whether an exclusive taker holds the gate (a new shared taker would wait)."""
    fd = os.open(tmp_path / "gpufleet-tests-gate.lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def waiting_on_a_lock(thread: threading.Thread) -> bool:
    """Whether the thread sleeps in the kernel's file-lock wait (its wchan says so)."""
    assert thread.is_alive(), f"{thread.name} ended: it never waited"
    wchan = Path(f"/proc/self/task/{thread.native_id}/wchan")
    return thread.native_id is not None and "lock" in wchan.read_text()


def test_the_exclusive_taker_waits_for_the_shared_holder_and_goes_before_a_later_one(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    first = quiet.shared()
    first.__enter__()

    def measure() -> None:
        with quiet.exclusive():
            events.append("measured")

    def later_test() -> None:
        with quiet.shared():
            events.append("later test ran")

    measuring = threading.Thread(target=measure, name="the measuring test")
    measuring.start()
    wait_until(lambda: gate_taken(tmp_path), "the measuring test to take the gate")
    wait_until(lambda: waiting_on_a_lock(measuring), "the measuring test to wait")
    later = threading.Thread(target=later_test, name="the later test")
    later.start()
    wait_until(lambda: waiting_on_a_lock(later), "the later test to wait")
    assert events == []  # the measuring test waits for the first; the later one for both
    events.append("first test ended")
    first.__exit__(None, None, None)
    measuring.join(timeout=60)
    later.join(timeout=60)
    assert events == ["first test ended", "measured", "later test ran"]


def test_a_planted_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / "gpufleet-tests-gate.lock").symlink_to(target)
    with pytest.raises(OSError), quiet.shared():
        pass
    assert not target.exists()
