"""A rollout's state file: every host's state and reason, written after every transition."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.rollout import private

# The path of one host: each step's state is recorded before the step runs, so a rollout
# killed mid-step knows where to pick up (steps are idempotent) and which hosts it drained.
STEPS = (
    "pending",
    "draining",
    "waiting-for-jobs",
    "deploying",
    "rebooting",
    "validating",
    "resuming",
    "done",
)
FINAL = ("done", "failed", "skipped")
STATES = (*STEPS, "failed", "skipped")
IN_PROGRESS = STEPS[1:-1]
STATE_VERSION = 1


class RolloutError(RuntimeError):
    """The rollout cannot go on as asked; the message says what and how to fix it."""


@dataclass
class HostRecord:
    """One host: ``HostRecord("gpu07", "failed", "gpufleet: rollout: validation failed: ...")``."""

    name: str
    state: str = "pending"
    reason: str = ""  # why it is failed/skipped, or the drain reason it carries
    drained_by_us: bool = False
    history: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class RolloutState:
    """The whole rollout as the state file holds it."""

    hosts: dict[str, HostRecord]
    options: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    stopped_because: str = ""

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for record in self.hosts.values():
            counts[record.state] += 1
        return counts

    def in_state(self, *states: str) -> list[HostRecord]:
        return [r for r in self.hosts.values() if r.state in states]

    def to_json(self) -> str:
        data = {
            "version": STATE_VERSION,
            "started": self.started,
            "stopped_because": self.stopped_because,
            "options": self.options,
            "hosts": [asdict(r) for r in self.hosts.values()],
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RolloutState:
        data = json.loads(text)
        if data.get("version") != STATE_VERSION:
            raise RolloutError(f"state file version {data.get('version')!r} is not {STATE_VERSION}")
        hosts = {}
        for raw in data["hosts"]:
            if raw.get("state") not in STATES:
                raise RolloutError(f"state file: host {raw.get('name')!r} in unknown state")
            raw["history"] = [tuple(h) for h in raw.get("history", [])]
            hosts[raw["name"]] = HostRecord(**raw)
        return cls(hosts, data.get("options", {}), data.get("started", time.time()))


def save(state: RolloutState, path: Path) -> None:
    """Write atomically (a mode-600 temp file of a random name beside it, fsync, rename) in a
    folder of this user's alone."""
    private.private_folder(path.parent)
    private.write_atomic(path, state.to_json())


def load(path: Path) -> RolloutState | None:
    """The saved rollout, or None when there is none; PrivateFileError when the file or its
    folder is not this user's alone."""
    text = private.read_private(path)
    if text is None:
        return None
    try:
        return RolloutState.from_json(text)
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise RolloutError(f"{path} is not a gpufleet rollout state file ({exc})") from None


def metrics_text(state: RolloutState) -> str:
    """Prometheus text: ``gpufleet_rollout_hosts{state="done"} 3`` for every state."""
    lines = [
        "# HELP gpufleet_rollout_hosts Hosts of the current gpufleet rollout, by state.",
        "# TYPE gpufleet_rollout_hosts gauge",
    ]
    lines += [f'gpufleet_rollout_hosts{{state="{s}"}} {n}' for s, n in state.counts().items()]
    return "\n".join(lines) + "\n"
