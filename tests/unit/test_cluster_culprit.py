"""Naming the host that makes a group fail, from pair outcomes (and a second pass)."""

from __future__ import annotations

from gpufleet.cluster.culprit import find_culprits, first_pass_pairs


def probe_with(bad: set[str], calls: list[tuple[str, str]]):
    def probe(a: str, b: str) -> bool:
        calls.append((a, b))
        return a not in bad and b not in bad

    return probe


def test_one_bad_host_among_three_is_named_from_the_pairs() -> None:
    calls: list[tuple[str, str]] = []
    named, how = find_culprits(["h1", "h2", "h3"], probe_with({"h2"}, calls))
    assert named == ["h2"] and "pairs (3 in the first pass)" in how
    assert len(calls) == 3  # all pairs, and the suspect already failed with a good host


def test_a_large_group_pairs_in_a_ring_and_confirms_suspects_with_a_good_host() -> None:
    hosts = [f"h{i}" for i in range(1, 11)]
    assert len(first_pass_pairs(hosts)) == 10
    calls: list[tuple[str, str]] = []
    named, _how = find_culprits(hosts, probe_with({"h5"}, calls))
    assert named == ["h5"]
    assert len(calls) == 10  # h5's ring pairs (h4, h6) failed; h4 and h6 passed elsewhere


def test_two_adjacent_bad_hosts_in_a_ring_are_both_named() -> None:
    hosts = [f"h{i}" for i in range(1, 11)]
    named, _how = find_culprits(hosts, probe_with({"h5", "h6"}, []))
    assert named == ["h5", "h6"]


def test_nothing_is_isolated_when_every_pair_fails_or_none_does() -> None:
    named, how = find_culprits(["h1", "h2", "h3"], lambda a, b: False)
    assert named == [] and "no host is known good" in how
    named, how = find_culprits(["h1", "h2", "h3"], lambda a, b: True)
    assert named == [] and "no single host" in how


def test_known_outcomes_are_used_without_probing_again() -> None:
    outcomes = [(("h1", "h2"), False), (("h1", "h3"), True), (("h2", "h3"), False)]
    named, _how = find_culprits(["h1", "h2", "h3"], probe_with(set(), []), outcomes)
    assert named == ["h2"]
