"""What `gpufleet rollout` checks before the first drain: the data, the deploy and the drain."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.datacheck import data_problems
from gpufleet.rollout.state import RolloutError

__all__ = ["data_problems", "drain_method", "drain_problems", "parse_data", "resolve_deploy"]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEPLOY = REPO_ROOT / "deploy" / "gpu_node.py"
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
