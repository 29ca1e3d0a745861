"""Waiting on what a test can observe, never on a fixed time: `wait_until` polls a condition
up to a generous deadline (a loaded 2-core CI machine is slow, not wrong), and
`pass_a_ctime_tick` returns once the filesystem's change-time clock has moved on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, *, timeout: float = 60.0) -> T:
    """The first true value of ``condition()``, polled every few ms; an `AssertionError` naming
    ``what`` when ``timeout`` seconds pass first. The deadline is only a bound on a hang."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def pass_a_ctime_tick(directory: Path) -> None:
    """Return once a change made in ``directory``'s filesystem from now on gets a later change
    time than every change made before the call.

    The kernel stamps change times from a coarse clock (a tick, 1 to 10 ms) at the
    filesystem's granularity (1 ns on ext4 and tmpfs, 1 s or 2 s on some others): a probe file
    is changed until its change time moves, whatever the tick is.
    """
    probe = directory / ".ctime-tick"
    probe.write_bytes(b"")
    first = probe.stat().st_ctime_ns

    def moved() -> bool:
        os.chmod(probe, 0o600 if probe.stat().st_mode & 0o077 else 0o644)
        return probe.stat().st_ctime_ns != first

    wait_until(moved, f"the change time of {probe} to move on", timeout=30)
