"""A host's probe and its stamp's facts read in one round trip (the deploy's first read).

pyinfra plans every host side by side, but each host's reads one after another: the probe,
then the stamp's replay. Read together, a no-op run costs one round trip per host.

Example (``node_plan``)::

    probed = read_with_stamp(host, HostProbe, enabled=spec.deploy_stamp, env_dir=..., ...)
    ...
    replies = replies_for(host, commands)   # the replay's answer, or None: read it again
"""

from __future__ import annotations

from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from pyinfra.api import FactBase, StringCommand
from pyinfra.api.host import Host

from gpufleet.stamp import store
from gpufleet.stamp.replay import StampReplay

T = TypeVar("T")

_AHEAD: WeakKeyDictionary[Host, tuple[tuple[str, ...], list[tuple[int, list[str]]]]] = (
    WeakKeyDictionary()
)


def read_with_stamp(host: Host, fact: type[FactBase[T]], *, enabled: bool, **kwargs: Any) -> T:
    """``host.get_fact(fact, **kwargs)``; where the host has a stamp, its facts are read in the
    same round trip and kept for ``replies_for``. A fact that fails here is read again by
    pyinfra itself, which reports it as it always does."""
    stamp = store.load(host.name) if enabled else None
    reader = fact()
    command = reader.command(**kwargs)
    raw = command.get_raw_value() if isinstance(command, StringCommand) else str(command)
    masked = command.get_masked_value() if isinstance(command, StringCommand) else raw
    if stamp is None or raw != masked or reader.requires_command(**kwargs):
        return host.get_fact(fact, **kwargs)
    commands = [read.command for read in stamp.facts]
    replies = host.get_fact(StampReplay, commands=[raw, *commands])
    if not replies or replies[0][0] != 0:
        return host.get_fact(fact, **kwargs)
    _AHEAD[host] = (tuple(commands), replies[1:])
    lines = replies[0][1]
    return reader.process(lines) if lines else reader.default()


def replies_for(host: Host, commands: list[str]) -> list[tuple[int, list[str]]] | None:
    """The replay read ahead for exactly ``commands`` (once), or None."""
    ahead = _AHEAD.pop(host, None)
    if ahead is None or ahead[0] != tuple(commands):
        return None
    return ahead[1]
