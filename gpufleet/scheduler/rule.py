"""The drain/resume rule: drain a failing node with a gpufleet reason, resume only our drains.

Pure functions over a node's state as sinfo reports it; no I/O. Runs on the hosts too (the
health check), so it needs the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

REASON_PREFIX = "gpufleet:"
# A rollout's drains: only the rollout resumes them (the health check and validate keep them).
ROLLOUT_PREFIX = "gpufleet: rollout:"
# scontrol keeps reasons of any length, but sinfo's table and Slurm's logs cut long ones.
MAX_REASON = 200
# A Slurm node name as gpufleet accepts it: what reaches scontrol's and squeue's argv.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
# sinfo %T suffixes: * not responding, ~ powered off, # powering up, ! pending power down,
# % powering down, $ maintenance reservation, @ pending reboot, ^ rebooting, - planned.
_STATE_SUFFIXES = "*~#!%$@^-"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


class SchedulerError(RuntimeError):
    """The scheduler could not be asked or told something; the message says what and why."""


def check_node_name(name: str) -> str:
    """Refuse a node name that could be anything but one argument of a Slurm command."""
    if not NODE_NAME.fullmatch(name):
        raise SchedulerError(
            f"{name!r} is not a Slurm node name gpufleet accepts (letters, digits, . _ -, "
            "starting with a letter or digit, at most 63)"
        )
    return name


def reason_text(check: str, message: str) -> str:
    """``gpufleet: <check>: <message>`` on one line, without quotes, at most MAX_REASON long.

    Control characters become spaces and double quotes single ones, so the reason is one
    plain argument for scontrol and reads the same in sinfo. Example:
    ``reason_text("persistence", "nvidia-persistenced is inactive")``
    """
    text = f"{REASON_PREFIX} {check}: {message}"
    text = _CONTROL.sub(" ", text).replace('"', "'").replace("\\", "/")
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3].rstrip() + "..."


@dataclass(frozen=True)
class NodeState:
    """One node as sinfo shows it: ``NodeState("gfsb-h1", "drained", reason="gpufleet: ...")``."""

    name: str
    state: str  # the base state word: idle, mixed, allocated, drained, draining, down, ...
    flags: frozenset[str] = field(default_factory=frozenset)
    reason: str = ""

    @property
    def shown(self) -> str:
        """The state as sinfo prints it: ``idle*``, ``drained``, ``idle+drain``."""
        suffixes = "".join(ch for ch in _STATE_SUFFIXES if ch in self.flags)
        extra = "".join(f"+{f}" for f in sorted(self.flags) if f not in _STATE_SUFFIXES)
        return f"{self.state}{extra}{suffixes}"

    @property
    def drained(self) -> bool:
        """Drained or draining: the scheduler starts no new job there."""
        return self.state in ("drained", "draining", "drain") or "drain" in self.flags

    @property
    def responding(self) -> bool:
        return "*" not in self.flags and self.state != "down"

    @property
    def ours(self) -> bool:
        """Drained by a gpufleet check (the reason starts with ``gpufleet:``), not a rollout."""
        return self.reason.startswith(REASON_PREFIX) and not self.held_by_rollout

    @property
    def held_by_rollout(self) -> bool:
        """Drained by a gpufleet rollout, which alone resumes it."""
        return self.reason.startswith(ROLLOUT_PREFIX)

    @property
    def out_of_service(self) -> bool:
        """Takes no new jobs: drained, down, not responding, failed or in an invalid state."""
        return self.drained or not self.responding or self.state in ("fail", "failing", "inval")

    @property
    def busy(self) -> bool:
        """Runs jobs (allocated, mixed, completing, or draining)."""
        return self.state in ("allocated", "mixed", "completing", "draining")


def parse_state_word(word: str) -> tuple[str, frozenset[str]]:
    """``"drained*"`` -> ``("drained", {"*"})``; ``"idle+drain"`` -> ``("idle", {"drain"})``."""
    word = word.strip().lower()
    flags = {ch for ch in word if ch in _STATE_SUFFIXES}
    base, *extra = word.rstrip(_STATE_SUFFIXES).split("+")
    return base, frozenset(flags | set(extra))


SINFO_FORMAT = "%N|%T|%E"


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """Nodes from ``sinfo -h -N -o '%N|%T|%E'`` (the reason last: it may hold ``|``)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        parts = line.split("|", 2)
        if len(parts) != 3 or not parts[0].strip():
            continue
        name, word, reason = (p.strip() for p in parts)
        base, flags = parse_state_word(word)
        # sinfo prints "none" for a node without a reason
        nodes[name] = NodeState(name, base, flags, "" if reason == "none" else reason)
    return nodes


@dataclass(frozen=True)
class Action:
    """What the rule decided for a node: ``drain`` (with the reason), ``resume`` or ``none``."""

    kind: str
    why: str
    reason: str = ""


def drained_for(reason: str) -> str:
    """The check named in a gpufleet reason: ``"gpufleet: xid: Xid 79"`` -> ``"xid"``."""
    return reason.removeprefix(REASON_PREFIX).strip().partition(": ")[0]


def decide(
    node: NodeState, failure: tuple[str, str] | None, passed: Collection[str] | None = None
) -> Action:
    """The rule, given the node and the first failing check (``(check, message)``) or None.

    A failing node is drained with a gpufleet reason unless someone else drained it (their
    reason is kept, as NHC does) or it does not respond (Slurm handles it). A passing node
    is resumed only when gpufleet drained it, and (given `passed`, the checks that ran and
    passed) only when the check that drained it is among them: the health check does not
    undo a drain for a validation check it never runs. A node drained by hand stays drained.
    """
    if failure is not None:
        reason = reason_text(*failure)
        if not node.responding:
            return Action("none", f"{node.name} is {node.state}, not responding: left to Slurm")
        if node.drained and not node.ours:
            owner = "a gpufleet rollout" if node.held_by_rollout else "someone else"
            return Action(
                "none", f"{node.name} is already drained by {owner} ({node.reason!r}): kept"
            )
        if node.drained and node.reason.startswith(reason):
            return Action("none", f"{node.name} is already drained: {node.reason}")
        return Action("drain", f"drain {node.name}: {reason}", reason)
    if node.drained and node.ours:
        check = drained_for(node.reason)
        if passed is not None and check not in passed:
            return Action(
                "none", f"{node.name} stays drained: {check!r}, which drained it, did not run"
            )
        return Action("resume", f"resume {node.name}: it passes (was: {node.reason})")
    if node.drained:
        owner = "a rollout's" if node.held_by_rollout else "not gpufleet's"
        return Action("none", f"{node.name} stays drained: {node.reason!r} is {owner}")
    return Action("none", f"{node.name} passes and is in service ({node.state})")
