"""A stamp's fact commands for its replay, with reads of one kind merged into one command each.

A stamp names a dozen ``FileDigest`` reads (one ``stat`` and one ``sha256sum`` each) and eight
``systemctl show`` reads (two per unit), ~3-6 ms of a host's CPU apiece. The replay runs one
``stat`` and one ``sha256sum`` over all the paths, and one ``systemctl show`` over all the
units, and hands each read exactly the lines its own command would have printed. Each line or
block names its path or unit, so it can only ever reach the read it belongs to; anything
unexpected (a tool that failed, a line too many) leaves the whole replay unread, and the host
is planned in full, as for any other difference.

Example::

    batch = batch_reads(stamp.facts)
    replies = batch.unpack(host.get_fact(StampReplay, commands=batch.commands))
    changed = differences(stamp.facts, replies)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from gpufleet.stamp import merged
from gpufleet.stamp.record import FactRead

Reply = tuple[int, list[str]]


@dataclass(frozen=True)
class Merge:
    """One kind of read that can share a command: ``claim`` gives a read's key (None: not this
    kind, or not exactly the command the fact sends), ``script`` the command for some keys,
    ``split`` each key's reply from that command's, or None when it printed anything else."""

    claim: Callable[[FactRead], Hashable | None]
    script: Callable[[list[Hashable]], str]
    split: Callable[[list[Hashable], Reply], dict[Hashable, Reply] | None]


MERGES = (
    Merge(merged.digest_key, merged.digests_script, merged.digest_replies),
    Merge(merged.unit_key, merged.units_script, merged.unit_replies),
)


@dataclass(frozen=True)
class Batch:
    """The replay's commands for the reads, and how to turn their replies back into one per
    read: ``entries[i]`` is ``(command index, None)`` for a read that runs on its own, or
    ``(command index, key)`` for one answered by a merged command."""

    commands: list[str]
    entries: list[tuple[int, Hashable | None]]
    merges: dict[int, tuple[Merge, list[Hashable]]]

    def unpack(self, replies: Sequence[Reply] | None) -> list[Reply] | None:
        """One ``(exit status, stdout lines)`` per read, or None when the replay did not finish
        or a merged command printed anything but what the reads' own commands would."""
        if replies is None or len(replies) != len(self.commands):
            return None
        split: dict[int, dict[Hashable, Reply]] = {}
        for index, (merge, keys) in self.merges.items():
            answers = merge.split(keys, replies[index])
            if answers is None:
                return None
            split[index] = answers
        return [replies[index] if key is None else split[index][key] for index, key in self.entries]


def batch_reads(reads: Sequence[FactRead]) -> Batch:
    """The replay of ``reads``, each kind of ``MERGES`` claimed by two reads or more merged."""
    claimed = [_claim(read) for read in reads]
    commands: list[str] = []
    entries: list[tuple[int, Hashable | None]] = []
    merges: dict[int, tuple[Merge, list[Hashable]]] = {}
    placed: dict[int, int] = {}  # merge number -> its command's index
    for read, (number, key) in zip(reads, claimed, strict=True):
        if number is None or sum(1 for n, _ in claimed if n == number) < 2:
            entries.append((len(commands), None))  # nothing to merge with: runs as recorded
            commands.append(read.command)
            continue
        if number not in placed:
            merge = MERGES[number]
            keys = list(dict.fromkeys(k for n, k in claimed if n == number))
            placed[number] = len(commands)
            merges[len(commands)] = (merge, keys)
            commands.append(merge.script(keys))
        entries.append((placed[number], key))
    return Batch(commands, entries, merges)


def _claim(read: FactRead) -> tuple[int | None, Hashable | None]:
    for number, merge in enumerate(MERGES):
        key = merge.claim(read)
        if key is not None:
            return number, key
    return None, None
