"""A cgroup of its own for each host, so that hosts' systemds never share one.

systemd-nspawn with ``--keep-unit`` makes the container's cgroup tree (``payload/``) under the
cgroup it was started in. Started by a supervisor that no systemd placed, every host's nspawn
sat in this machine's root cgroup, so all hosts' systemds managed the same
``/payload/system.slice/...``: while one host's systemd removed the cgroup of a unit that had
finished, another's was attaching a process of its own unit with the same name there. About one
boot in ten then failed with ``Failed to attach to cgroup /system.slice/<unit>: No such file or
directory`` (status 219/CGROUP; seen on systemd-remount-fs and systemd-user-sessions) and the host
came up ``degraded``. Each host's nspawn now starts in ``<hierarchy>/gpufleet-sandbox/<host>``.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
GROUP = "gpufleet-sandbox"


def hierarchies(root: Path = CGROUP_FS) -> list[Path]:
    """The hierarchies systemd tracks processes in: cgroup v2 at the root, or, on a v1 or
    hybrid machine, the named ``systemd`` hierarchy and the ``unified`` v2 one when mounted."""
    if (root / "cgroup.controllers").is_file():
        return [root]
    return [
        path for path in (root / "systemd", root / "unified") if (path / "cgroup.procs").is_file()
    ]


def host_cgroups(name: str, root: Path = CGROUP_FS) -> list[Path]:
    return [hierarchy / GROUP / name for hierarchy in hierarchies(root)]


def prepare(name: str, root: Path = CGROUP_FS) -> list[Path]:
    """Make the host's cgroups (after removing empty ones a previous boot left). Where this
    machine lets us make none (a read-only cgroup file system), the host boots as before, in
    the supervisor's cgroup; the caller says so."""
    paths = host_cgroups(name, root)
    made = []
    for path in paths:
        remove_tree(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        made.append(path)
    return made


def join(paths: list[Path]) -> None:
    """Move the calling process into `paths` (run in the child, before exec of nspawn)."""
    for path in paths:
        (path / "cgroup.procs").write_text(f"{os.getpid()}\n")


def remove_tree(path: Path) -> None:
    """rmdir `path` and its sub-cgroups, deepest first; those that still hold processes stay."""
    if not path.is_dir():
        return
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with suppress(OSError):
            sub.rmdir()
    with suppress(OSError):
        path.rmdir()
