"""The TF worker port during the cluster tier (review finding 2): open to the group's own
addresses only, through an nft table of the run's that the clean-up deletes; a host where it
cannot be added stops the run before any worker starts."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

from gpufleet.cluster import firewall
from gpufleet.cluster import run as cluster_run
from gpufleet.cluster.config import ClusterHost
from tests.unit.test_cluster_reach import host


def member(name: str, address: str, sudo: bool = True) -> ClusterHost:
    return dataclasses.replace(host(name), address=address, sudo=sudo)


GROUP = [member("gpu-01", "10.0.0.1"), member("gpu-02", "10.0.0.2"), member("gpu-03", "fd00::3")]


class NftLauncher:
    """Records what each host is asked; ``nft`` fails on the hosts in ``broken``."""

    def __init__(self, broken: Sequence[str] = ()) -> None:
        self.broken = set(broken)
        self.asked: list[tuple[str, str, str]] = []

    def run(self, h: ClusterHost, script: str, timeout: float = 60, stdin: str = "") -> Any:
        self.asked.append((h.name, script, stdin))
        if "nft -f -" in script and h.name in self.broken:
            return 127, "", "sh: 1: nft: not found\n"
        return 0, "", ""

    def start(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no worker may start while its port is open to everyone")

    def cleanup(self, hosts: Sequence[ClusterHost], ports: Sequence[int] = ()) -> dict[str, str]:
        return dict.fromkeys((h.name for h in hosts), "clean")


def test_the_ruleset_accepts_the_group_and_drops_everyone_else() -> None:
    rules = firewall.ruleset("20261201T120000Z-ab12", 23456, ["10.0.0.2", "10.0.0.1", "[fd00::3]"])
    assert "table inet gpufleet_20261201T120000Z_ab12 {" in rules
    assert "tcp dport 23456 ip saddr { 10.0.0.1, 10.0.0.2 } accept" in rules
    assert "tcp dport 23456 ip6 saddr { fd00::3 } accept" in rules
    lines = [line.strip() for line in rules.splitlines()]
    assert lines.index("iif lo accept") < lines.index("tcp dport 23456 drop")
    assert lines[-3] == "tcp dport 23456 drop"  # after every accept: the rest is dropped


def test_a_member_that_is_not_an_address_is_refused() -> None:
    with pytest.raises(ValueError):
        firewall.ruleset("r1", 23456, ["10.0.0.1; flush ruleset"])
    with pytest.raises(ValueError):
        firewall.table_name("r1; flush ruleset")


def test_nft_parses_the_ruleset() -> None:
    # nft is in scripts/apt-packages.txt: missing, this fails rather than skips.
    assert shutil.which("nft"), "nft is missing: scripts/bootstrap installs nftables"
    rules = firewall.ruleset("r1", 23456, ["10.0.0.1", "fd00::3"])
    done = subprocess.run(
        ["nft", "--check", "-f", "-"], input=rules, capture_output=True, text=True
    )
    assert done.returncode == 0 or "Operation not permitted" in done.stderr, done.stderr


def test_the_run_adds_the_table_before_the_job_and_deletes_it_after(monkeypatch: Any) -> None:
    launcher = NftLauncher()
    seen: list[int] = []
    monkeypatch.setattr(cluster_run, "measure_group", lambda *_a: seen.append(len(launcher.asked)))
    doc = cluster_run.run_group(launcher, GROUP, group="g", run_id="r1", steps=1)  # type: ignore[arg-type]
    assert doc["run_error"] == ""
    guards = [(n, s, i) for n, s, i in launcher.asked if "nft -f -" in s]
    assert [n for n, _s, _i in guards] == ["gpu-01", "gpu-02", "gpu-03"]
    assert all(s == "sudo -n sh -c 'nft -f -'" for _n, s, _i in guards)
    assert all("ip saddr { 10.0.0.1, 10.0.0.2 } accept" in i for _n, _s, i in guards)
    assert seen == [len(GROUP) + len(guards)]  # measured once every table was in place
    deletes = [n for n, s, _i in launcher.asked if "nft delete table inet gpufleet_r1" in s]
    assert deletes == ["gpu-01", "gpu-02", "gpu-03"]
    assert launcher.asked[-1][1].startswith("sudo -n sh -c")  # the deletes come last


def test_a_host_without_nft_stops_the_run_before_any_worker() -> None:
    launcher = NftLauncher(broken=["gpu-02"])
    doc = cluster_run.run_group(launcher, GROUP, group="g", run_id="r1", steps=1)  # type: ignore[arg-type]
    assert doc["status"] == "error" and doc["training"] is None
    assert "could not limit the TF worker port on gpu-02" in doc["run_error"]
    assert [c["name"] for c in doc["checks"]] == ["firewall::gpu-02"]
    assert "nft: not found" in doc["checks"][0]["reason"]
    deletes = [n for n, s, _i in launcher.asked if "nft delete table" in s]
    assert deletes == ["gpu-01", "gpu-02", "gpu-03"]  # whatever was added goes


def test_a_member_name_that_does_not_resolve_fails_every_host() -> None:
    group = [*GROUP[:2], member("gpu-04", "no-such-host.invalid")]
    failed = firewall.guard(NftLauncher(), group, "r1")
    assert set(failed) == {"gpu-01", "gpu-02", "gpu-04"}
    assert "no-such-host.invalid" in failed["gpu-01"]
