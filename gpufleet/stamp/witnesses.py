"""Witnesses of pyinfra's own facts, which a deploy stamp replays instead of the fact.

A witness is a cheaper command whose output stays the same only while the fact's value would
(gpufleet's own facts carry theirs as a ``stamp_witness`` method: ``EnvProblems``,
``KeyringFingerprints``). The recorder runs it right before the fact and stamps its output
(a change between the two then shows next time: review finding 7).

Example: ``witness_of(DebPackages)()`` is the ``stat`` of dpkg's database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra.api import StringCommand
from pyinfra.facts.deb import DebPackages

Witness = Callable[..., StringCommand]


def deb_packages() -> StringCommand:
    """``DebPackages`` (``dpkg -l``, ~600 lines): the packages dpkg has installed, at their
    versions. ``dpkg -l`` lists what dpkg's status file holds, with the journal of a run that
    did not finish (``updates/``) applied; dpkg replaces the status file by a rename after
    every change, and any other write sets its change time. So while the file (size, change
    time, inode), the journal's entries and dpkg itself read the same, so does the list. 3 ms
    of a host's CPU against 12 ms, and a line instead of 60 KB to send back."""
    return StringCommand(
        "TZ=UTC0 stat -L -c '%n %s %z %i' /var/lib/dpkg/status",
        '"$(command -v dpkg)" "$(command -v dpkg-query)" 2>/dev/null;',
        "ls -A /var/lib/dpkg/updates 2>/dev/null",
    )


_PYINFRA_FACTS: dict[type, Witness] = {DebPackages: deb_packages}


def witness_of(cls: type) -> Witness | None:
    """The witness of fact class ``cls`` (called with the fact's own arguments), or None."""
    own = getattr(cls, "stamp_witness", None)
    if own is not None:

        def method(**arguments: Any) -> StringCommand:
            return cls().stamp_witness(**arguments)

        return method
    return _PYINFRA_FACTS.get(cls)
