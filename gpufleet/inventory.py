"""The hosts of a pyinfra inventory, read through `pyinfra INVENTORY debug-inventory --json`."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class InventoryError(ValueError):
    """The inventory could not be read or gave no usable host; the message says how to fix it."""


@dataclass(frozen=True)
class InventoryHost:
    """One inventory host: its name, how to reach it over SSH, and its `host.data`.

    ``connector`` is ``"local"`` for ``@local`` and ``"ssh"`` otherwise; the ``ssh_*`` fields
    follow pyinfra's own defaults (hostname = the host's name, port/user/key unset = ssh's).

    Example: ``InventoryHost("gpu-a", "ssh", "10.0.0.5", 2222, "ops", "/root/.ssh/id", {})``
    """

    name: str
    connector: str
    ssh_hostname: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    ssh_key: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        return self.connector == "local"


def _pyinfra_command() -> list[str]:
    # Prefer the pyinfra that sits beside the running interpreter (the same virtualenv).
    beside = Path(sys.executable).with_name("pyinfra")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("pyinfra")
    if found:
        return [found]
    return [sys.executable, "-m", "pyinfra"]


DEBUG_LOG = "pyinfra-debug.log"  # pyinfra writes its traceback there, in the working directory
_TRAILER = re.compile(
    r"pyinfra-debug\.log|submitting a bug report|pyinfra --support|An internal exception occurred"
)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _moved_debug_log(before: float | None) -> str:
    """Where the pyinfra-debug.log this run wrote is now, or "": a new one moves out of the
    user's working directory into a temporary one; one that was there before stays."""
    log = Path(DEBUG_LOG)
    written = _mtime(log)
    if written is None or written == before:
        return ""
    if before is not None:
        return str(log.resolve())
    target = Path(tempfile.mkdtemp(prefix="gpufleet-pyinfra-")) / DEBUG_LOG
    try:
        shutil.move(str(log), target)
    except OSError:
        return str(log.resolve())
    return str(target)


def looks_like_file(inventory: str) -> bool:
    """Whether pyinfra would treat ``inventory`` as a file (rather than host names)."""
    return inventory.endswith(".py") or os.sep in inventory


def read_debug_inventory(inventory: str, *, timeout: float = 120.0) -> list[dict[str, Any]]:
    """Run ``pyinfra INVENTORY debug-inventory --json`` in a subprocess and return its list.

    A subprocess, never an import: importing ``pyinfra_cli`` monkey-patches this process with
    gevent. Example: ``read_debug_inventory("inventories/sandbox.py")``
    """
    if looks_like_file(inventory) and not Path(inventory).is_file():
        raise InventoryError(
            f"inventory file {inventory!r} does not exist; pass the path of a pyinfra inventory"
            " (e.g. inventories/sandbox.py), host names separated by commas, or @local"
        )
    command = [*_pyinfra_command(), "-y", inventory, "debug-inventory", "--json"]
    before = _mtime(Path(DEBUG_LOG))
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise InventoryError(
            f"`pyinfra {inventory} debug-inventory` took over {timeout:.0f} s; "
            "check that the inventory file does no network I/O at import time"
        ) from exc
    if proc.returncode != 0:
        # pyinfra's own crash trailer (a log in the working directory, "submit a bug report")
        # is for pyinfra's bugs; an inventory's error is the user's to fix, said above it.
        lines = [line for line in proc.stderr.strip().splitlines() if not _TRAILER.search(line)]
        log = _moved_debug_log(before)
        tail = "\n".join(lines[-8:] + ([f"(pyinfra's traceback: {log})"] if log else []))
        raise InventoryError(
            f"`pyinfra {inventory} debug-inventory` failed (exit {proc.returncode}):\n{tail}"
        )
    return parse_debug_inventory(proc.stdout, inventory=inventory, stderr=proc.stderr)


def parse_debug_inventory(text: str, *, inventory: str = "", stderr: str = "") -> list[dict]:
    """Decode the JSON list that ``debug-inventory --json`` prints; an empty list is an error."""
    try:
        hosts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InventoryError(
            f"`pyinfra {inventory} debug-inventory --json` printed no JSON ({exc}); "
            "is the pyinfra in use 3.10 or newer?"
        ) from exc
    if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
        raise InventoryError(
            f"`pyinfra {inventory} debug-inventory --json` printed {type(hosts).__name__}, "
            "expected a list of hosts"
        )
    if not hosts:
        # pyinfra exits 0 with an empty inventory for a mistyped path or module name.
        why = " ".join(line.strip() for line in stderr.splitlines() if "neither" in line)
        raise InventoryError(
            f"inventory {inventory!r} yields no hosts{': ' + why if why else ''}; "
            "check the path, and that the file defines at least one list of hosts"
        )
    return hosts


def _int_or_none(value: Any, host: str, key: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InventoryError(f"host {host}: {key}={value!r} is not a port number") from None


def host_from_dict(entry: Mapping[str, Any]) -> InventoryHost:
    """Turn one ``debug-inventory`` entry into an :class:`InventoryHost`.

    Supports ``@local``, ``@ssh/NAME`` and plain names (pyinfra's SSH default); other
    connectors (``@docker/...``, ``@chroot/...``) are refused with the reason.
    """
    name = str(entry.get("name", ""))
    data = dict(entry.get("data") or {})
    # pyinfra lists a group once per place it was found (e.g. "@local" twice): keep first.
    groups = tuple(dict.fromkeys(str(g) for g in entry.get("groups") or ()))
    if not name:
        raise InventoryError(f"debug-inventory gave a host without a name: {entry!r}")
    if name == "@local":
        return InventoryHost(name=name, connector="local", data=data, groups=groups)
    if name.startswith("@") and not name.startswith("@ssh/"):
        connector = name[1:].split("/", 1)[0]
        raise InventoryError(
            f"host {name}: the @{connector} connector is not supported by gpufleet (validate, "
            "rollout and thresholds reach hosts over OpenSSH); "
            "use SSH hosts or @local"
        )
    if data.get("ssh_password"):
        raise InventoryError(
            f"host {name}: ssh_password is set; validation runs non-interactively over "
            "OpenSSH, so give the host an ssh_key (or an agent) instead"
        )
    default_hostname = name[len("@ssh/") :] if name.startswith("@ssh/") else name
    key = data.get("ssh_key")
    return InventoryHost(
        name=name,
        connector="ssh",
        ssh_hostname=str(data.get("ssh_hostname") or default_hostname),
        ssh_port=_int_or_none(data.get("ssh_port"), name, "ssh_port"),
        ssh_user=str(data["ssh_user"]) if data.get("ssh_user") else None,
        ssh_key=os.path.expanduser(str(key)) if key else None,
        data=data,
        groups=groups,
    )


def select_hosts(hosts: Sequence[InventoryHost], limits: Sequence[str]) -> list[InventoryHost]:
    """Keep the hosts whose name or one of whose groups matches a ``--limit`` glob."""
    if not limits:
        return list(hosts)
    chosen = [
        h
        for h in hosts
        if any(fnmatch.fnmatch(n, pat) for pat in limits for n in (h.name, *h.groups))
    ]
    if not chosen:
        names = ", ".join(h.name for h in hosts)
        raise InventoryError(
            f"--limit {' '.join(limits)} matches no host or group; the inventory has: {names}"
        )
    return chosen


def load_hosts(inventory: str, limits: Sequence[str] = ()) -> list[InventoryHost]:
    """The inventory's hosts (optionally limited), ready for validation.

    Example: ``[h.name for h in load_hosts("@local")] == ["@local"]``
    """
    hosts = [host_from_dict(entry) for entry in read_debug_inventory(inventory)]
    return select_hosts(hosts, limits)
