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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_dir() -> Path:
    """/run/lock where there is one (every user may lock there), else the temp folder."""
    run_lock = Path("/run/lock")
    return run_lock if os.access(run_lock, os.W_OK | os.X_OK) else Path(tempfile.gettempdir())


def _open(name: str) -> int:
    # O_NOFOLLOW: the folder is world-writable; a planted symlink is refused, never followed.
    # Read-only suffices for flock, so a file another user made still serves this one.
    path = lock_dir() / f"gpufleet-tests-{name}.lock"
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


@contextmanager
def shared() -> Iterator[None]:
    """Held by every sandbox-free test: waits while a measuring test runs or waits to."""
    gate, main = _open("gate"), _open("quiet")
    try:
        fcntl.flock(gate, fcntl.LOCK_SH)
        fcntl.flock(main, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        os.close(main)
        os.close(gate)


@contextmanager
def exclusive() -> Iterator[None]:
    """Held by a measuring test: no sandbox-free test runs on this machine meanwhile."""
    gate, main = _open("gate"), _open("quiet")
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX)
        yield
    finally:
        os.close(main)
        os.close(gate)
