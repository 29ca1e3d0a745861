"""A host's container leader (its systemd, PID 1 inside): finding, recording and checking it.

The supervisor and systemd-nspawn are only the host's power supply: killing them leaves the
container's systemd running, re-parented to this machine's init, with sshd still answering.
So the sandbox records the leader itself (PID and start time, which survive PID reuse checks)
and the inode of the host's network namespace, and judges a host by those.
"""

from __future__ import annotations

import os
from pathlib import Path

LEADER_FILE = "leader.pid"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def children(pid: int) -> list[int]:
    """Direct children of `pid`, from every one of its threads."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in task.read_text().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return found


def is_namespace_init(status: str) -> bool:
    """True when a /proc/PID/status text belongs to PID 1 of a child PID namespace
    (``NSpid:  4242  1``: its PID here, then 1 inside)."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            pids = line.split()[1:]
            return len(pids) >= 2 and pids[-1] == "1"
    return False


def container_leader(nspawn_pid: int) -> int | None:
    """The container's init among systemd-nspawn's children, once it has started."""
    for child in children(nspawn_pid):
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if is_namespace_init(status):
            return child
    return None


def record(path: Path, pid: int) -> None:
    """Write ``PID START_TIME`` to `path`, atomically."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid} {start_time(pid)}\n")
    tmp.replace(path)


def recorded(path: Path) -> int | None:
    """The leader recorded in `path` while that very process still runs, else None."""
    try:
        pid_text, start_text = path.read_text().split()
        pid, start = int(pid_text), int(start_text)
    except (FileNotFoundError, ValueError):
        return None
    return pid if start_time(pid) == start else None


def netns_inode(path: Path) -> int | None:
    """The inode that identifies a network namespace file (``/run/netns/NAME``)."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def netns_processes(inode: int) -> list[int]:
    """Live processes in the network namespace `inode`, even after its name was deleted."""
    wanted = f"net:[{inode}]"
    found = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            if os.readlink(proc_dir / "ns" / "net") == wanted:
                found.append(int(proc_dir.name))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return [pid for pid in found if start_time(pid) is not None]


def is_leader(pid: int) -> bool:
    """True when `pid` is live and PID 1 of a child PID namespace."""
    try:
        return is_namespace_init(Path(f"/proc/{pid}/status").read_text())
    except (FileNotFoundError, ProcessLookupError):
        return False


def leaders(leader_files: list[Path], inodes: list[int]) -> list[int]:
    """Live container leaders: those recorded in `leader_files` and any namespace init found
    in the hosts' network namespaces `inodes` (a leader whose record was lost)."""
    found = {pid for path in leader_files if (pid := recorded(path)) is not None}
    for inode in inodes:
        found.update(pid for pid in netns_processes(inode) if is_leader(pid))
    return sorted(found)
