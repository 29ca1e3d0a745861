"""A host's probe and its stamp's facts read in one round trip (the deploy's first read).

pyinfra plans every host side by side, but each host's reads one after another: the probe,
then the stamp's replay. Read together, a no-op run costs one round trip per host.

Example (``node_plan``)::

    probed = read_with_stamp(host, HostProbe, enabled=spec.deploy_stamp, env_dir=..., ...)
    ...
    stamp, replies = taken(host) or (store.load(host.name), None)   # None: read them again
"""

from __future__ import annotations

from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from pyinfra.api import FactBase
from pyinfra.api.host import Host

from gpufleet.stamp import store
from gpufleet.stamp.batch import batch_reads
from gpufleet.stamp.record import shell_text
from gpufleet.stamp.replay import StampReplay

T = TypeVar("T")

# Per host: the stamp read ahead with the probe, and the replay of its facts.
_AHEAD: WeakKeyDictionary[Host, tuple[store.Stamp, list[tuple[int, list[str]]]]] = (
    WeakKeyDictionary()
)


def read_with_stamp(host: Host, fact: type[FactBase[T]], *, enabled: bool, **kwargs: Any) -> T:
    """``host.get_fact(fact, **kwargs)``; where the host has a stamp, its facts are read in the
    same round trip and kept for ``taken``. A fact that fails here is read again by pyinfra
    itself, which reports it as it always does."""
    stamp = store.load(host.name) if enabled else None
    reader = fact()
    raw, _secret = shell_text(reader.command(**kwargs))
    if stamp is None or raw is None or reader.requires_command(**kwargs):
        return host.get_fact(fact, **kwargs)
    batch = batch_reads(stamp.facts)
    replies = host.get_fact(StampReplay, commands=[raw, *batch.commands])
    if not replies or replies[0][0] != 0:
        return host.get_fact(fact, **kwargs)
    # [] when the merged digests are not what the reads would print: the stamp then fails
    _AHEAD[host] = (stamp, batch.unpack(replies[1:]) or [])
    lines = replies[0][1]
    return reader.process(lines) if lines else reader.default()


def taken(host: Host) -> tuple[store.Stamp, list[tuple[int, list[str]]]] | None:
    """The stamp read ahead for ``host`` and its facts' replay (once), or None."""
    return _AHEAD.pop(host, None)
