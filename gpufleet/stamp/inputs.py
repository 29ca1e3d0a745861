"""Everything besides facts that a host's plan is made from, as one digest.

That is: Python's version and every installed distribution's (jinja2 renders every file),
the deploy file and the modules it imported from its own folder, every file of the shipped
packages (the validation payload's, gpufleet's whole source among them) and of pyinfra itself
(a locally patched pyinfra of the same version), the inventory (every
host's name, groups and data: stages such as the fleet cache and Slurm read other hosts), and
the host's plan from its probe. Of the probe, the fields that change between any two runs
(free disk space, the processes on the GPUs) enter only through what preflight makes of them,
its refusals, which are empty on every host a stamp is written for. The fleet cache's host
plans from every active host's probe (its wheelhouse and keys serve them all), so its digest
holds theirs too.

Example: ``inputs_digest(plan, host, "deploy/gpu_node.py", payload_sources(), served={})``
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import stat
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from pyinfra.api.host import Host
from pyinfra.context import ctx_state

from gpufleet.operations.payload import SKIP
from gpufleet.stamp import store
from gpufleet.stamp.canonical import digest

# In the stamp folder, beside the stamps: the sources' digests by size, times and inode.
SOURCES_FILE = "sources.json"


def inputs_digest(
    plan: Any, host: Host, deploy_file: str, sources: dict[str, Path], served: dict[str, Any]
) -> str:
    """The digest of a host's plan inputs; raises ``NotCanonical`` when one has no stable form.

    ``sources``: the shipped packages' folders by name; ``served``: the plan of every active
    host by name (only the fleet cache's own digest holds them).
    """
    parts: dict[str, Any] = {
        "run": _run_digest(ctx_state.get(), deploy_file, sources),
        "host": host.name,
        "plan": plan_view(plan),
    }
    if plan.is_cache_host:
        parts["served"] = {name: plan_view(other) for name, other in sorted(served.items())}
    return digest(parts)


# What every host of one run shares, digested once per run (not once per host).
_RUN: WeakKeyDictionary[Any, tuple[tuple[str, tuple[str, ...]], str]] = WeakKeyDictionary()


def _run_digest(state: Any, deploy_file: str, sources: dict[str, Path]) -> str:
    key = (deploy_file, tuple(sorted(str(folder) for folder in sources.values())))
    known = _RUN.get(state)
    if known is not None and known[0] == key:
        return known[1]
    trees = {**sources, **pyinfra_trees()}
    shared = digest(
        {
            "pyinfra": metadata.version("pyinfra"),
            "python": platform.python_version(),
            "distributions": distributions(),
            "deploy_file": _file_digest(Path(deploy_file)),
            "deploy_imports": deploy_imports(deploy_file, trees),
            "sources": tree_digest(trees, known=store.stamp_dir() / SOURCES_FILE),
            "inventory": _inventory(state.inventory),
        }
    )
    _RUN[state] = (key, shared)
    return shared


def distributions() -> list[str]:
    """Every distribution this Python sees, as its metadata folder's name (which holds its
    version: ``jinja2-3.1.4.dist-info``), sorted: any library that shapes a plan (jinja2,
    gevent, typing_extensions...) upgraded means new inputs. A listing of each import folder
    (1 ms), not importlib.metadata's reading of every distribution (0.3 s)."""
    found: set[str] = set()
    for folder in sys.path:
        try:
            with os.scandir(folder or ".") as entries:
                found.update(
                    e.name for e in entries if e.name.endswith((".dist-info", ".egg-info"))
                )
        except OSError:
            continue
    return sorted(found)


def pyinfra_trees() -> dict[str, Path]:
    """pyinfra's own folders: a patched file of the same version changes the inputs."""
    import pyinfra
    import pyinfra_cli

    return {
        "pyinfra": Path(pyinfra.__file__).parent,
        "pyinfra_cli": Path(pyinfra_cli.__file__).parent,
    }


def deploy_imports(deploy_file: str, trees: dict[str, Path]) -> dict[str, str | None]:
    """sha256 of every module imported from the deploy file's folder (a site's deploy file
    and the helpers it imports), those of ``trees`` aside (digested with them)."""
    folder = Path(deploy_file).resolve().parent
    shipped = [tree.resolve() for tree in trees.values()]
    found: dict[str, str | None] = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name:
            continue
        path = Path(name).resolve()
        if path.is_relative_to(folder) and not any(path.is_relative_to(s) for s in shipped):
            found[str(path.relative_to(folder))] = _file_digest(path)
    return dict(sorted(found.items()))


def plan_view(plan: Any) -> dict[str, Any]:
    """The plan as stamps see it: the volatile probe fields replaced by preflight's refusals."""
    from gpufleet.stages.preflight import refusals

    steady = dataclasses.replace(plan.state, free_disk={}, free_disk_kib=None, gpu_processes=())
    return {
        "plan": dataclasses.replace(plan, state=steady),
        "refusals": refusals(plan),
    }


def _inventory(inventory: Any) -> list[Any]:
    hosts = []
    for host in sorted(inventory, key=lambda each: each.name):
        data = host.data.dict() if hasattr(host.data, "dict") else dict(host.data)
        groups = sorted(getattr(group, "name", str(group)) for group in host.groups)
        hosts.append({"name": host.name, "groups": groups, "data": data})
    return hosts


def tree_digest(sources: dict[str, Path], known: Path | None = None) -> str:
    """sha256 over every file the validation payload ships (path, executable bit and bytes, in
    path order; caches and compiled files left out, as the payload leaves them): 30 times
    faster than building the payload's archive, which the stamp would otherwise have to do on
    every run. The cache folders are never entered (they hold as many files as the sources).

    ``known``: a private JSON file (gpufleet.stamp.store) of each file's sha256 by its size,
    modification and change times (to the nanosecond) and inode, as git's index keeps them: a
    file whose four read the same is not read again (3 ms against 26 ms for gpufleet's
    sources). Writing a file sets its change time, which nothing but the clock can set back.
    """
    before = _known_digests(known)
    # As git's racy entries: a file changed within a clock tick of the last time what is known
    # was written can have the times it had then (coarse change times before Linux 6.13, or
    # NFS attribute caches): it is read again.
    racy = _written_ns(known) - RACY_NS
    after: dict[str, list[Any]] = {}
    total = hashlib.sha256()
    for name, folder in sorted(sources.items()):
        files: list[tuple[str, ...]] = []
        for top, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in SKIP]
            base = Path(top).relative_to(folder)
            files.extend((base / n).parts for n in names if not n.endswith(".pyc"))
        for parts in sorted(files):
            path = folder.joinpath(*parts)
            try:
                info = path.stat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
            seen = before.get(str(path))
            fresh = max(info.st_mtime_ns, info.st_ctime_ns) >= racy
            sha = seen[4] if seen is not None and seen[:4] == key and not fresh else _sha256(path)
            after[str(path)] = [*key, sha]
            total.update(f"{name}/{'/'.join(parts)}\0{info.st_mode & 0o100}\0".encode())
            total.update(bytes.fromhex(sha))
    if known is not None and after != before:
        store.write_private(known, after)
    return total.hexdigest()


RACY_NS = 2_000_000_000  # 2 s: the coarsest change-time tick (FAT, some NFS servers)


def _written_ns(known: Path | None) -> int:
    try:
        return known.stat().st_mtime_ns if known is not None else 0
    except OSError:
        return 0


def _known_digests(known: Path | None) -> dict[str, list[Any]]:
    document = store.read_private(known) if known is not None else None
    if not isinstance(document, dict):
        return {}
    return {
        path: entry
        for path, entry in document.items()
        if isinstance(entry, list) and len(entry) == 5 and isinstance(entry[4], str)
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
