"""Inventory data checked on the control node before any host is touched, with its origin."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryHost

# The key a NodeSpec message is about: "unknown inventory key 'k'" or "k = value ...".
_MESSAGE_KEY = re.compile(r"^(?:unknown inventory key '(?P<unknown>\w+)'|(?P<key>\w+) = )")


def _message_key(message: str) -> str | None:
    found = _MESSAGE_KEY.match(message)
    return (found.group("unknown") or found.group("key")) if found else None


def _group_data_files(inventory: str, groups: Sequence[str], key: str) -> list[str]:
    """The group_data files pyinfra reads for these groups that set ``key``."""
    folders = [Path(inventory).parent / "group_data", Path("group_data")]
    pattern = re.compile(rf"^{re.escape(key)}\s*[:=]", re.MULTILINE)
    found: list[str] = []
    for folder in dict.fromkeys(f.resolve() for f in folders if f.is_dir()):
        for group in ("all", *groups):
            path = folder / f"{group}.py"
            if path.is_file() and pattern.search(path.read_text(errors="replace")):
                here = path.is_relative_to(Path.cwd())
                found.append(str(path.relative_to(Path.cwd()) if here else path))
    return found


def origin(
    key: str | None, host: InventoryHost, inventory: str, overrides: Mapping[str, Any]
) -> str:
    """Where a host's value of ``key`` was set, in words an operator can act on."""
    if key is not None and key in overrides:
        value = overrides[key]
        return f"--data {key}={value if isinstance(value, str) else json.dumps(value)}"
    files = _group_data_files(inventory, host.groups, key) if key else []
    if files:
        return ", ".join(files)
    # pyinfra adds a group named after the inventory file: it says nothing here
    groups = [g for g in host.groups if not g.startswith("@") and g != Path(inventory).stem]
    where = f"groups {', '.join(groups)}" if groups else "host data"
    return f"{inventory} ({where})"


def host_problems(
    host: InventoryHost, inventory: str, overrides: Mapping[str, Any] | None = None
) -> list[tuple[str, str]]:
    """One host's data (with the overrides) checked as the deploy checks it: per problem, the
    message and where its value was set."""
    from gpufleet.spec import NodeSpec, SpecError
    from validation.verdicts.expectations import spec_data

    overrides = overrides or {}
    try:
        NodeSpec.from_host_data(spec_data({**host.data, **overrides}))
    except SpecError as exc:
        lines = str(exc).splitlines()
        messages = [m.strip()[2:] for m in lines[1:]] if len(lines) > 1 else lines
        return [(m, origin(_message_key(m), host, inventory, overrides)) for m in messages]
    except ValueError as exc:  # a value the spec's checks did not foresee
        return [(f"the data could not be read ({exc})", f"{inventory} or --data")]
    return []


def data_problems(
    hosts: Sequence[InventoryHost], overrides: Mapping[str, Any], inventory: str
) -> list[str]:
    """Every host's data with the overrides, checked as the deploy will check it; each problem
    once, with the hosts it hits and where its value came from."""
    seen: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        for message, where in host_problems(host, inventory, overrides):
            seen.setdefault((message, where), []).append(host.name)
    problems = []
    for (message, where), names in seen.items():
        problems.append(f"{_who(names, len(hosts))}, set in {where}: {message}")
    return problems


def _who(names: Sequence[str], total: int, shown: int = 5) -> str:
    if len(names) == 1:
        return f"host {names[0]}"
    listed = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
    return f"{'every host' if len(names) == total else f'{len(names)} hosts'} ({listed})"
