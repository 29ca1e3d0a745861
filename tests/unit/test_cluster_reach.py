"""The cluster tier asks every host first: a host that is down is named, no other is blamed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpufleet.cluster import run as cluster_run
from gpufleet.cluster.config import ClusterHost


def host(name: str) -> ClusterHost:
    return ClusterHost(
        name=name,
        alias=f"a-{name}",
        address=name,
        python="/usr/bin/python3",
        payload_dir="/opt/gpufleet/payload/current",
        interconnect_gbps=10,
        gpu_less=True,
        sudo=True,
        textfile_dir=None,
    )


class DownLauncher:
    """Answers `true` on every host but those down; records anything else it is asked."""

    def __init__(self, down: Sequence[str]) -> None:
        self.down = set(down)
        self.asked: list[tuple[str, str]] = []
        self.cleaned: list[str] = []

    def run(self, h: ClusterHost, script: str, timeout: float = 60, stdin: str = "") -> Any:
        self.asked.append((h.name, script))
        if h.name in self.down:
            return (
                255,
                "",
                f"ssh: Could not resolve hostname {h.address}: Name or service not known\n",
            )
        return 0, "", ""

    def start(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing may start on a group with a host down")

    def cleanup(self, hosts: Sequence[ClusterHost], ports: Sequence[int] = ()) -> dict[str, str]:
        self.cleaned = [h.name for h in hosts]
        return dict.fromkeys(self.cleaned, "clean")


def test_a_host_down_is_named_and_nothing_is_measured() -> None:
    # review §3 item 13: unreachable hosts gave six iperf3 failures and a culprit
    hosts = [host("gpu-01"), host("gpu-02"), host("gpu-03")]
    launcher = DownLauncher(["gpu-03"])
    doc = cluster_run.run_group(launcher, hosts, group="g", run_id="r1", steps=1)  # type: ignore[arg-type]
    assert doc["status"] == "error"
    assert doc["run_error"].startswith("could not reach gpu-03; nothing was measured")
    assert [c["name"] for c in doc["checks"]] == ["reach::gpu-03"]
    assert "could not reach gpu-03: ssh: Could not resolve hostname" in doc["checks"][0]["reason"]
    assert doc["culprits"] == [] and doc["network"] is None and doc["training"] is None
    assert {script for _name, script in launcher.asked} == {"true"}
    assert launcher.cleaned == ["gpu-01", "gpu-02"]
    assert doc["cleanup"]["gpu-03"] == cluster_run.NOT_REACHED


def test_every_host_answering_goes_on_to_measure(monkeypatch: Any) -> None:
    measured: list[list[str]] = []
    monkeypatch.setattr(
        cluster_run,
        "measure_group",
        lambda _l, hosts, _d, _s: measured.append([h.name for h in hosts]),
    )
    monkeypatch.setattr(cluster_run.firewall, "guard", lambda *_a: {})  # test_cluster_firewall
    hosts = [host("gpu-01"), host("gpu-02")]
    doc = cluster_run.run_group(DownLauncher([]), hosts, group="g", run_id="r2", steps=1)  # type: ignore[arg-type]
    assert measured == [["gpu-01", "gpu-02"]] and doc["run_error"] == ""


def test_a_host_down_exits_3_as_the_other_tiers_do() -> None:
    # review §3 item 13 / top-15 #15: "could not reach" is validate's exit 3, not 2 (an error)
    hosts = [host("gpu-01"), host("gpu-02")]
    doc = cluster_run.run_group(
        DownLauncher(["gpu-01", "gpu-02"]), hosts, group="g", run_id="r3", steps=1
    )  # type: ignore[arg-type]
    assert cluster_run.exit_status(doc) == 3
    assert cluster_run.exit_status({**doc, "cleanup": {}, "status": "error"}) == 2
    assert cluster_run.exit_status({"status": "pass", "cleanup": {"gpu-01": "clean"}}) == 0
