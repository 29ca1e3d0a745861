"""A bad inventory value stops pyinfra naming where it was set, not a line of gpufleet's code."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# The keys a NodeSpec message is about: "unknown inventory key 'k'" or "k = value ...".
_KEYS = re.compile(r"unknown inventory key '(\w+)'|(?:^|: |- )(\w+) = ", re.MULTILINE)


def keys_of(message: str) -> list[str]:
    """The inventory keys a spec message names, in order, once each."""
    found = [a or b for a, b in _KEYS.findall(message)]
    return list(dict.fromkeys(k for k in found if k))


def origin(host: Any, key: str) -> str:
    """Where a pyinfra host's ``key`` was set: ``--data``, its groups' data (the inventory or
    group_data/<group>.py), or the host's own data in the inventory."""
    inventory = host.inventory
    overrides = inventory.get_override_data() or {}
    if key in overrides:
        value = overrides[key]
        return f"--data {key}={value if isinstance(value, str) else json.dumps(value)}"
    groups = _groups_setting(host, key)
    if groups:
        files = ", ".join(f"group_data/{g}.py" for g in groups)
        return f"the data of group {', '.join(groups)} (the inventory, or {files})"
    return f"the host data of {host.name} in the inventory"


def _groups_setting(host: Any, key: str) -> list[str]:
    names = dict.fromkeys(str(g) for g in host.groups)  # pyinfra may list a group twice
    return [g for g in names if key in (host.inventory.get_group_data(g) or {})]


def with_origins(host: Any, message: str) -> str:
    """``message`` and, per key it names, where that key was set. A message about ``--data``
    keys, or one group's, is every such host's, not that of the one pyinfra planned first."""
    keys = keys_of(message)
    where = [f"{key} is set in {origin(host, key)}" for key in keys]
    overrides = host.inventory.get_override_data() or {}
    groups = {tuple(_groups_setting(host, key)) for key in keys}
    if keys and all(key in overrides for key in keys):
        message = message.replace(f"host {host.name}: ", "every host: ", 1)
    elif keys and len(groups) == 1 and len(group := next(iter(groups))) == 1:
        message = message.replace(f"host {host.name}: ", f"every host of group {group[0]}: ", 1)
    return f"{message} ({'; '.join(where)})" if where else message


def inventory_error(base: type[Exception], host: Any, message: str) -> Exception:
    """The error to raise: under pyinfra's CLI, one it prints as "pyinfra error: MESSAGE" with
    no source location (its CliError); elsewhere ``base`` itself."""
    return cli_error(base, with_origins(host, message))


def cli_error(base: type[Exception], text: str) -> Exception:
    """``base(text)``, which pyinfra's CLI prints as "pyinfra error: TEXT", without the line of
    gpufleet's code it was raised on (that reads as a bug in gpufleet)."""
    cli = sys.modules.get("pyinfra_cli.exceptions")
    if cli is None:
        return base(text)

    class Refused(base, cli.CliError):  # type: ignore[misc,valid-type,name-defined]
        def __init__(self, text: str) -> None:
            Exception.__init__(self, text)
            self.message = text

    return Refused(text)
