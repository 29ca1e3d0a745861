"""tests/quiet.py: a measuring test waits for the sandbox-free test in progress, and no new one
starts until it is done (the turnstile), whatever order they come in.

Each taker is a process of its own that holds the lock until told to let go, so nothing in this
test's own process ever waits on a lock: a test that failed midway once left a thread blocked
on one, and the pytest process with it (which held the machine's own lock for the tier)."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import quiet

REPO = Path(__file__).resolve().parents[2]
TAKER = """
import sys
from pathlib import Path
from tests import quiet
quiet.lock_dir = lambda: Path(sys.argv[2])
quiet.ON_WAIT = lambda what: print("waiting", flush=True)
with getattr(quiet, sys.argv[1])():
    print("held", flush=True)
    sys.stdin.readline()
"""


class Taker:
    """A process that takes the lock (``shared`` or ``exclusive``) in ``folder``, says
    "waiting" when it has to and "held" once it has it, and lets go when told to."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TAKER, kind, str(folder)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )

    def says(self, wait_s: float = 0.0) -> str | None:
        """Its next line ("waiting" or "held"), None if it says nothing within ``wait_s``."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], wait_s)
        return self.proc.stdout.readline().decode().strip() if ready else None

    def let_go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def takers(tmp_path: Path) -> Iterator[list[Taker]]:
    started: list[Taker] = []
    yield started
    for taker in started:  # whatever happened, none is left holding or waiting
        taker.proc.kill()
        taker.proc.wait(timeout=60)


def test_the_exclusive_taker_waits_for_the_shared_holder_and_goes_before_a_later_one(
    tmp_path: Path, takers: list[Taker]
) -> None:
    first = Taker("shared", tmp_path)
    takers.append(first)
    assert first.says(wait_s=60) == "held"
    measuring = Taker("exclusive", tmp_path)
    takers.append(measuring)
    assert measuring.says(wait_s=60) == "waiting"  # for the first
    later = Taker("shared", tmp_path)
    takers.append(later)
    # Without the turnstile it would join the first's shared hold at once ("held").
    assert later.says(wait_s=60) == "waiting"
    first.let_go()
    assert measuring.says(wait_s=60) == "held", "the measuring test did not get the lock"
    assert later.says() is None, "a later test ran while the measuring test held the lock"
    measuring.let_go()
    assert later.says(wait_s=60) == "held", "the later test never ran"


def test_a_planted_symlink_is_refused_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quiet, "lock_dir", lambda: tmp_path)
    target = tmp_path / "elsewhere"
    (tmp_path / "gpufleet-tests-gate.lock").symlink_to(target)
    with pytest.raises(OSError), quiet.shared():
        pass
    assert not target.exists()
