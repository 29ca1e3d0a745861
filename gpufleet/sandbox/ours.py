"""Which processes on this machine a sandbox under a given state directory started.

A process is ours only when its arguments have the exact shape the sandbox starts it with and
name a path of our state directory in the argument that takes it, never because some word
appears somewhere on its command line (an operator's `grep systemd-nspawn <state>/log/...`
is not ours).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from gpufleet.sandbox import procs

SUPERVISOR_MODULE = "gpufleet.sandbox.supervisor"


def _roots(state_dir: Path) -> tuple[str, ...]:
    """The state directory as commands name it: as given, and made absolute."""
    return tuple({f"{state_dir}/", f"{os.path.abspath(state_dir)}/"})


def _option(argv: list[str], name: str) -> str:
    """The value after `name` in `argv` ("" when absent)."""
    for flag, value in itertools.pairwise(argv):
        if flag == name:
            return value
    return ""


def is_sandbox_argv(argv: list[str], state_dir: Path) -> bool:
    """True when `argv` is one of the programs a sandbox under `state_dir` starts."""
    if not argv:
        return False
    roots = _roots(state_dir)
    program = os.path.basename(argv[0])
    if argv[1:3] == ["-m", SUPERVISOR_MODULE]:
        return _option(argv, "--root").startswith(tuple(f"{r}hosts/" for r in roots))
    # the stand-in upstream (gpufleet.sandbox.upstream), or http.server as older sandboxes ran
    if argv[1:3] in (["-m", "gpufleet.sandbox.upstream"], ["-m", "http.server"]):
        return _option(argv, "--directory") in {f"{r}www" for r in roots}
    if program == "systemd-nspawn":
        return any(arg.startswith(tuple(f"--directory={r}hosts/" for r in roots)) for arg in argv)
    if program == "apt-cacher-ng":
        return any(f"PidFile={r}run/apt-cacher-ng.pid" in argv for r in roots)
    return False


def sandbox_processes(state_dir: Path) -> list[tuple[int, str]]:
    """Live processes that a sandbox under `state_dir` started, with their command lines."""
    found = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit() or int(proc_dir.name) == os.getpid():
            continue
        pid = int(proc_dir.name)
        if is_sandbox_argv(procs.argv(pid), state_dir):
            found.append((pid, procs.cmdline(pid)))
    return found
