"""The whole cluster tier on this machine: three "hosts" at 127.0.0.1-3, each command run by a
local shell where SSH would run it (a stand-in for SSH only: iperf3, ping, ip and TensorFlow
are real). Proves the tier's logic end to end without the sandbox, kill path included."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufleet.cluster import network
from gpufleet.cluster.config import ClusterHost
from gpufleet.cluster.launcher import Launcher
from gpufleet.cluster.run import network_culprits, run_group
from tests.ports import free_ports, lost_its_port
from tests.prerequisites import require_tools

pytestmark = pytest.mark.workload

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("iperf3", "ping", "ip", "ss")


MARK = "GPUFLEET_LOCAL_RUN"


def marked_processes(run_id: str) -> str:
    """A shell command listing (``PID ARGS``) only the processes that carry this run's mark.

    The three "hosts" are this machine, where other work runs too: in CI the integration tier
    beside this one runs the same workers and iperf3 in the sandbox's containers (whose
    processes this machine's ``ps`` lists) and ssh clients naming them. A real host's
    leftover check sees only that host; the mark gives the stand-in the same view."""
    return (
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null | "
        f"grep -qx '{MARK}={run_id}' && "
        "printf '%s %s\\n' \"${p#/proc/}\" \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\"; done"
    )


class LocalShell(Launcher):
    """Runs each host's command in a new session of a local shell (sshd gives one each), with
    a run directory per host: here the three hosts share one /tmp. Every process it starts
    carries the run's mark, and the leftover check lists only those (``marked_processes``)."""

    def __init__(self, ssh_config: Path, run_id: str) -> None:
        super().__init__(ssh_config, run_id, processes=marked_processes(run_id))

    def _ssh(self, host: ClusterHost, script: str) -> list[str]:
        script = script.replace(self.directory, f"{self.directory}-{host.name}")
        return ["env", f"{MARK}={self.run_id}", "setsid", "-w", "sh", "-c", script]

    def start(self, host: ClusterHost, label: str, argv: Sequence[str], env=None):  # type: ignore[no-untyped-def]
        remote = super().start(host, label, argv, env)
        # Reaped at once, as sshd reaps its session's shell: a zombie would count as alive.
        threading.Thread(target=remote.proc.wait, daemon=True).start()
        return remote

    def close(self, hosts: Sequence[ClusterHost]) -> None:
        pass


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_tools(*TOOLS, install="apt-get install iperf3 iputils-ping iproute2")


@pytest.fixture(autouse=True)
def _short_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 s of iperf3 and 3 pings per link: these tests prove the tier's logic on loopback, not
    a link's speed, and the shipped 3 s + 10 pings cost CI 6 links x 5 s per run."""
    monkeypatch.setattr(network, "IPERF3_SECONDS", 1)
    monkeypatch.setattr(network, "PING_COUNT", 3)


def hosts(gbps: int = 1, ports: Sequence[int] | None = None) -> list[ClusterHost]:
    # TensorFlow's gRPC server listens on its port on every address: one port per host, each
    # free when picked (tests/ports.py; a run that lost one to someone else is run again).
    ports = list(ports or free_ports(3))
    return [
        ClusterHost(
            f"h{i}",
            f"a{i}",
            f"127.0.0.{i}",
            sys.executable,
            str(REPO),
            gbps,
            True,
            False,
            None,
            worker_port=ports[i - 1],
        )
        for i in (1, 2, 3)
    ]


def run_on_free_ports(launcher: LocalShell, steps: int, tries: int = 3) -> tuple[dict, list]:
    """`run_group` on three local hosts, again on new ports when a worker lost its port."""
    for _ in range(tries):
        group = hosts()
        doc = run_group(launcher, group, group="local", run_id=launcher.run_id, steps=steps)
        if not lost_its_port(json.dumps(doc)):
            return doc, group
    raise AssertionError(f"no three free worker ports in {tries} tries")


def test_three_local_hosts_pass_the_tier_and_leave_nothing(tmp_path: Path) -> None:
    launcher = LocalShell(tmp_path / "unused", "20261201T000000Z-local1")
    doc, _ = run_on_free_ports(launcher, steps=60)
    assert doc["status"] == "pass", doc
    assert len(doc["network"]["links"]) == 6
    assert {link["interface"] for link in doc["network"]["links"]} == {"lo"}
    assert doc["training"]["identical_weights"] is True
    assert {w["workers"] for w in doc["training"]["workers"]} == {3}
    assert set(doc["cleanup"].values()) == {"clean"}


def test_a_declared_speed_the_links_cannot_reach_fails_every_link(tmp_path: Path) -> None:
    launcher = LocalShell(tmp_path / "unused", "20261201T000000Z-local2")
    group = hosts(3200)
    section = network.measure(launcher, group)
    assert {link["status"] for link in section["links"]} == {"fail"}
    assert all("< 2.24e+03 (0.7 x the declared 3200" in link["reason"] for link in section["links"])
    named, how = network_culprits(group, section)
    assert named == [] and "no host is known good" in how  # every pair fails: no one to name
    assert set(launcher.cleanup(group).values()) == {"clean"}


def worker_of_task(run_id: str, index: int) -> int | None:
    """This run's local worker process whose TF_CONFIG makes it task ``index`` (never one of
    the integration tier's, which may run beside it on this machine)."""
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        task = f'"index": {index}}}'.encode()
        mark = f"{MARK}={run_id}".encode()
        if (
            b"validation.cluster.worker" in cmdline
            and mark in environ
            and any(e.startswith(b"TF_CONFIG=") and task in e for e in environ)
        ):
            return int(proc.name)
    return None


def test_a_killed_worker_is_named_and_its_peers_are_stopped(tmp_path: Path) -> None:
    launcher = LocalShell(tmp_path / "unused", "20261201T000000Z-local3")
    group = hosts()
    h2_port = group[1].worker_port

    def kill_h2_worker() -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            listening = subprocess.run(["ss", "-Htln"], capture_output=True, text=True).stdout
            pid = worker_of_task(launcher.run_id, 1)
            if pid and f":{h2_port} " in listening:
                time.sleep(3)
                subprocess.run(["kill", "-KILL", str(pid)], check=False)
                return
            time.sleep(0.5)

    killer = threading.Thread(target=kill_h2_worker)
    killer.start()
    doc = run_group(launcher, group, group="local", run_id=launcher.run_id, steps=10**6)
    killer.join()
    assert doc["training"]["status"] == "fail", doc["training"]
    assert "the worker on h2 exited 137 (killed by signal 9)" in doc["training"]["reason"]
    assert doc["culprits"][-1]["hosts"] == ["h2"], doc["culprits"]
    assert set(doc["cleanup"].values()) == {"clean"}, doc["cleanup"]
    assert worker_of_task(launcher.run_id, 0) is None
    assert worker_of_task(launcher.run_id, 2) is None
