"""Starting detached processes and stopping exactly those, by PID, never by name."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def cmdline(pid: int) -> str:
    """The process's command line joined by spaces, or "" when there is no such live process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return ""
    if state in ("Z", "X"):  # exited; only its parent's wait() is missing
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def argv(pid: int) -> list[str]:
    """The process's arguments as it was started, or [] when there is no such live process."""
    if not cmdline(pid):
        return []
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def is_ours(pid: int | None, marker: str) -> bool:
    """True when `pid` is alive and its command line contains `marker` (guards against a PID
    that was reused by an unrelated process after a crash)."""
    if not pid:
        return False
    return marker in cmdline(pid)


def spawn_detached(
    command: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `command` in its own session with output appended to `log`; it outlives the caller.

    Example: ``proc = spawn_detached(["sleep", "60"], Path("/tmp/sleep.log")); proc.pid``
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )


def start_detached(command: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Like `spawn_detached`, for callers that only keep the PID."""
    return spawn_detached(command, log, env).pid


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not cmdline(pid):
            return True
        time.sleep(0.1)
    return not cmdline(pid)


def stop_pid(pid: int | None, marker: str, timeout: float = 30.0) -> bool:
    """SIGTERM the process if it is ours, SIGKILL it after `timeout` s; True if one was stopped."""
    if pid is None or not is_ours(pid, marker):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5.0)
    except ProcessLookupError:
        pass
    return True


def stop_pids(pids: list[tuple[int | None, str]], timeout: float = 30.0) -> list[int]:
    """`stop_pid` for many processes at once: SIGTERM all, then wait for all (hosts shut down
    in parallel, not one after another). Returns the PIDs that were ours and are now stopped."""
    ours = [pid for pid, marker in pids if pid is not None and is_ours(pid, marker)]
    for pid in ours:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in ours:
        if not wait_gone(pid, max(0.0, deadline - time.monotonic())):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5.0)
    return ours


def alive(pid: int) -> bool:
    """True while the process exists and has not exited (a PID namespace's init that was killed
    has no command line left while it waits for the namespace's other processes to die)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_and_wait(pids: list[int], timeout: float = 10.0) -> None:
    """SIGKILL each PID now (a power cut), then wait until each has exited."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


@contextmanager
def exclusive(lock_file: Path, what: str, log: Callable[[str], None] = print) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file`, waiting (and saying so) while another process does:
    two `sandbox up` or image builds at once would tear each other's work down."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process that holds the {what} lock ({lock_file}) ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
