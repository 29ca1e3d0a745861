"""A machine-wide lock that keeps the sandbox-free tiers off the CPU while a test measures.

``scripts/test`` runs the unit, operations and workloads tiers beside the integration tier on
one 2-core machine. Most integration tests only wait on the sandbox's hosts, but the cluster
tier judges each link by its iperf3 throughput, and a TensorFlow test beside it took a healthy
veth from 13 to 1.3 Gbit/s (the floor is 0.7): the verdict would depend on what ran beside it.

Every sandbox-free test holds the lock shared (``tests/conftest.py``); a test that measures
takes it exclusive (``quiet_machine`` in ``tests/integration/conftest.py``): it waits for the
test in progress to end, and no new one starts until it is done. A turnstile (``gate``) gives
the exclusive taker precedence, so a stream of short shared tests cannot starve it.

    with exclusive():
        measure_the_links()
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path


def lock_dir() -> Path:
    """/run/lock where there is one (every user may lock there), else the temp folder."""
    run_lock = Path("/run/lock")
    return run_lock if os.access(run_lock, os.W_OK | os.X_OK) else Path(tempfile.gettempdir())


# A bound on a hang, never a wait that decides anything: the longest sandbox-free test takes
# about a minute and a measuring test a few; a holder past this is stuck, and says so.
WAIT_S = 1200
# Called once with "shared" or "exclusive" when a take has to wait (tests/unit/test_quiet_lock.py
# watches for it); None: nothing is said.
ON_WAIT: Callable[[str], None] | None = None


def _take(fd: int, mode: int, what: str) -> None:
    """flock ``fd`` in ``mode``, polled, so a lock held by a stuck process fails the test that
    waits (naming the holders) instead of hanging the tier."""
    deadline = time.monotonic() + WAIT_S
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if ON_WAIT is not None and pause == 0.001:
                ON_WAIT(what)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"tests/quiet.py: no {what} lock after {WAIT_S} s; held by {_holders(fd)}: "
                    "a test that holds it is stuck (kill it, or look at it with py-spy dump)"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _holders(fd: int) -> str:
    """The PIDs /proc/locks names for the lock file behind ``fd``."""
    inode = os.fstat(fd).st_ino
    pids = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[5].endswith(f":{inode}"):
            pids.add(fields[4])
    return "pid " + ", ".join(sorted(pids)) if pids else "no process /proc/locks names"


def _open(name: str) -> int:
    # O_NOFOLLOW: the folder is world-writable; a planted symlink is refused, never followed.
    # Read-only suffices for flock, so a file another user made still serves this one.
    path = lock_dir() / f"gpufleet-tests-{name}.lock"
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def shared() -> AbstractContextManager[None]:
    """Held by every sandbox-free test: waits while a measuring test runs or waits to."""
    return _hold(fcntl.LOCK_SH, "shared")


def exclusive() -> AbstractContextManager[None]:
    """Held by a measuring test: no sandbox-free test runs on this machine meanwhile."""
    return _hold(fcntl.LOCK_EX, "exclusive")


@contextmanager
def _hold(mode: int, what: str) -> Iterator[None]:
    gate, main = _open("gate"), _open("quiet")
    try:
        _take(gate, mode, what)
        _take(main, mode, what)
        if mode == fcntl.LOCK_SH:  # through the turnstile: the next taker may pass the gate
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        os.close(main)
        os.close(gate)
