"""Which host makes a group fail: pairs of hosts, as Google's cluster-health-scanner does.

First pass: pairs (every pair for small groups, else a ring). A host in a passing pair is
known good. A suspect (a host whose every pair failed) gets a second pass, paired with a known
good host; a suspect that fails again is named. If every pair failed, no host is known good and
nothing can be isolated: the fault is shared (a switch, a setting) or on more than one host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")
ALL_PAIRS_MAX = 6


def first_pass_pairs(hosts: Sequence[T]) -> list[tuple[T, T]]:
    """Every pair for up to ALL_PAIRS_MAX hosts, else each host with the next (a ring)."""
    if len(hosts) <= ALL_PAIRS_MAX:
        return [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    return [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]


def suspects_from(
    hosts: Sequence[T], outcomes: Iterable[tuple[tuple[T, T], bool]]
) -> tuple[list[T], list[T]]:
    """(suspects, known good) from pair outcomes (pair, passed)."""
    good: set[int] = set()
    seen: set[int] = set()
    for (a, b), passed in outcomes:
        seen.update((id(a), id(b)))
        if passed:
            good.update((id(a), id(b)))
    suspects = [h for h in hosts if id(h) in seen and id(h) not in good]
    return suspects, [h for h in hosts if id(h) in good]


def find_culprits(
    hosts: Sequence[T],
    probe: Callable[[T, T], bool],
    outcomes: Iterable[tuple[tuple[T, T], bool]] | None = None,
) -> tuple[list[T], str]:
    """(named hosts, how they were found). ``probe(a, b)`` runs the check on two hosts and says
    whether it passed; ``outcomes`` are first-pass results already known (e.g. measured links).
    """
    if len(hosts) < 2:
        return [], "one host: nothing to pair"
    known = list(outcomes) if outcomes is not None else None
    if known is None:
        known = [((a, b), probe(a, b)) for a, b in first_pass_pairs(hosts)]
    suspects, good = suspects_from(hosts, known)
    if not suspects:
        return [], "every host passed in some pair: no single host fails the group"
    if not good:
        return [], (
            "every pair failed, so no host is known good: the fault is shared (switch, "
            "setting) or on more than one host"
        )
    tested = {frozenset((id(a), id(b))) for (a, b), _ok in known}
    named = []
    for suspect in suspects:
        # A suspect in no passing pair that already failed beside a known good host is named;
        # otherwise it is paired with one now.
        if any(frozenset((id(suspect), id(g))) in tested for g in good) or not probe(
            suspect, good[0]
        ):
            named.append(suspect)
    how = f"pairs ({len(known)} in the first pass), suspects paired with a known good host"
    return named, how
