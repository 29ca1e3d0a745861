"""Everything besides facts that a host's plan is made from, as one digest.

That is: pyinfra's and Python's versions, the deploy file, every file of the shipped
packages (the validation payload's, gpufleet's whole source among them), the inventory (every
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
import platform
from importlib import metadata
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from pyinfra.api.host import Host
from pyinfra.context import ctx_state

from gpufleet.operations.payload import SKIP
from gpufleet.stamp.canonical import digest


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
    shared = digest(
        {
            "pyinfra": metadata.version("pyinfra"),
            "python": platform.python_version(),
            "deploy_file": _file_digest(Path(deploy_file)),
            "sources": tree_digest(sources),
            "inventory": _inventory(state.inventory),
        }
    )
    _RUN[state] = (key, shared)
    return shared


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


def tree_digest(sources: dict[str, Path]) -> str:
    """sha256 over every file the validation payload ships (path and bytes, in order; caches
    and compiled files left out, as the payload leaves them): 30 times faster than building
    the payload's archive, which the stamp would otherwise have to do on every run."""
    total = hashlib.sha256()
    for name, folder in sorted(sources.items()):
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if any(part in SKIP for part in relative.parts) or path.suffix == ".pyc":
                continue
            if path.is_file():
                total.update(
                    f"{name}/{relative.as_posix()}\0{path.stat().st_mode & 0o100}\0".encode()
                )
                total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
