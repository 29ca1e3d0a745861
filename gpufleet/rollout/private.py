"""A rollout's own files: one process per state file (a lock), owner-only state, temp and logs.

Whoever can write a rollout's state file decides which hosts return to service unvalidated, so
its folder and files are this user's alone and checked on every load; and two processes on one
state file would both work every host, so the second refuses while the first holds the lock.

Example::

    with hold(Path("rollout/state.json")):       # PrivateFileError naming the holder's PID
        write_private(path, text)                # mode 600, random temp name, no symlink
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class PrivateFileError(RuntimeError):
    """A rollout file is shared, held by another process, or not a plain file of this user's."""


def lock_path(state_path: Path) -> Path:
    return state_path.with_name(f"{state_path.name}.lock")


@contextmanager
def hold(state_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``state_path`` (``<state>.lock``) for the ``with`` block; a
    PrivateFileError naming the holder's PID and host when another process holds it."""
    private_folder(state_path.parent)
    path = lock_path(state_path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        check_private(path, os.fstat(fd))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown pid"
            raise PrivateFileError(
                f"a rollout of {state_path} is running ({holder}); wait for it to end or stop "
                f"it, then run this again (the lock is {path})"
            ) from None
        # Who holds it, so that a second process can name it (the lock itself is the flock).
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock; the file stays (unlinking it would race a waiter)


def private_folder(folder: Path) -> None:
    """Create ``folder`` mode 700, or check an existing one is this user's and writable by no
    one else (then made 700)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private(folder, folder.lstat(), kind=stat.S_ISDIR)
    os.chmod(folder, 0o700)


def check_private(
    path: Path, info: os.stat_result, kind: Callable[[int], bool] = stat.S_ISREG
) -> None:
    """PrivateFileError unless ``path`` is of that kind (no link), this user's, and writable by no
    one else."""
    problem = None
    if not kind(info.st_mode):
        problem = "is not a plain " + ("folder" if kind is stat.S_ISDIR else "file")
    elif info.st_uid != os.getuid():
        problem = f"belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
    elif info.st_mode & 0o022:
        problem = f"is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        raise PrivateFileError(
            f"{path} {problem}: a rollout's state decides which hosts return to service, so "
            "only its owner may write it. Fix: give --state-file a path in a folder of yours "
            "(mode 700), or remove that one."
        )


def read_private(path: Path) -> str | None:
    """The text of ``path`` after checking it (and its folder) is this user's alone; None when
    absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise PrivateFileError(f"{path} cannot be read as a rollout state file ({exc})") from None
    with os.fdopen(fd) as handle:
        check_private(path.parent, path.parent.lstat(), kind=stat.S_ISDIR)
        check_private(path, os.fstat(fd))
        os.fchmod(fd, 0o600)
        return handle.read()


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` by ``text`` through a temp file of a random name created beside it
    (never an existing file or a link), fsynced, then renamed; the result has ``mode``."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def open_log(path: Path) -> IO[str]:
    """``path`` opened to append, mode 600 (its commands carry ``--data`` values); no link."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a")
