"""What `gpufleet rollout` checks before the first drain: the data, the deploy and the drain."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryHost
from gpufleet.rollout.state import RolloutError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEPLOY = REPO_ROOT / "deploy" / "gpu_node.py"
# The key a NodeSpec message is about: "unknown inventory key 'k'" or "k = value ...".
_MESSAGE_KEY = re.compile(r"^(?:unknown inventory key '(?P<unknown>\w+)'|(?P<key>\w+) = )")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def parse_value(text: str) -> Any:
    """A ``--data`` value as pyinfra reads it: true/false, an int, JSON, else the string."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_data(items: Sequence[str]) -> dict[str, Any]:
    """The ``--data KEY=VALUE`` overrides; one without ``=`` or a key is a RolloutError."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RolloutError(
                f"--data {item!r} is not KEY=VALUE; Fix: write it as e.g. --data driver_branch=580"
            )
        overrides[key.strip()] = parse_value(value)
    return overrides


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
    groups = [g for g in host.groups if not g.startswith("@")]
    where = f"groups {', '.join(groups)}" if groups else "host data"
    return f"{inventory} ({where})"


def data_problems(
    hosts: Sequence[InventoryHost], overrides: Mapping[str, Any], inventory: str
) -> list[str]:
    """Every host's data with the overrides, checked as the deploy will check it; each problem
    once, with the hosts it hits and where its value came from."""
    from gpufleet.spec import NodeSpec, SpecError
    from validation.expectations import spec_data

    seen: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        try:
            NodeSpec.from_host_data(spec_data({**host.data, **overrides}))
        except SpecError as exc:
            lines = str(exc).splitlines()
            messages = [m.strip()[2:] for m in lines[1:]] if len(lines) > 1 else lines
            for message in messages:
                where = origin(_message_key(message), host, inventory, overrides)
                seen.setdefault((message, where), []).append(host.name)
        except ValueError as exc:  # a value the spec's checks did not foresee
            where = f"{inventory} or --data"
            seen.setdefault((f"the data could not be read ({exc})", where), []).append(host.name)
    problems = []
    for (message, where), names in seen.items():
        problems.append(f"{_who(names, len(hosts))}, set in {where}: {message}")
    return problems


def _who(names: Sequence[str], total: int, shown: int = 5) -> str:
    if len(names) == 1:
        return f"host {names[0]}"
    listed = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
    return f"{'every host' if len(names) == total else f'{len(names)} hosts'} ({listed})"


def resolve_deploy(deploy: str | None) -> tuple[str, list[str]]:
    """The deploy file as an absolute path, and the problem if it is not a file."""
    path = Path(deploy) if deploy else DEFAULT_DEPLOY
    if not path.is_file():
        return str(path), [
            f"deploy file {str(path)!r} does not exist; pass --deploy PATH "
            f"(default: {DEFAULT_DEPLOY})"
        ]
    return str(path.resolve()), []


def command_problems(flag: str, command: str | None) -> list[str]:
    """A drain or resume command with a placeholder other than {host}."""
    if not command:
        return []
    unknown = [name for name in _PLACEHOLDER.findall(command) if name != "host"]
    if unknown:
        return [
            f"{flag} {command!r} has the placeholder {{{unknown[0]}}}; only {{host}} is "
            "replaced (by the host's name). Fix: write {host}"
        ]
    return []


def drain_problems(kind: str, source: str, cordon: str | None, no_drain: bool) -> list[str]:
    """Without a scheduler, a rollout must be told how to drain, or told not to."""
    if kind == "none" and not cordon and not no_drain:
        return [
            f"no scheduler (scheduler none, {source}) and no --cordon-cmd: hosts would be "
            "deployed and rebooted while they may run jobs. Fix: --scheduler slurm (with "
            "slurm_controller set), --cordon-cmd 'CMD {host}' (and --uncordon-cmd), or "
            "--no-drain if nothing runs on these hosts"
        ]
    if kind != "none" and (cordon or no_drain):
        flag = "--cordon-cmd" if cordon else "--no-drain"
        return [f"{flag} goes with --scheduler none; the {kind} scheduler drains the hosts itself"]
    return []


def drain_method(kind: str, cordon: str | None, controller: str = "") -> str:
    """How a host is taken out of service, in a few words; ``{host}`` for its name."""
    if kind == "slurm":
        return f"slurm drain via {controller or 'the controller'}"
    if cordon:
        return f"`{cordon}`"
    return "none (--no-drain)"
