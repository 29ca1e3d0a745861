"""The cluster tier's network part: which links, how iperf3/ping output reads, the verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.cluster import network
from gpufleet.cluster.config import ClusterHost

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cluster"


def host(name: str, gbps: int = 10) -> ClusterHost:
    return ClusterHost(
        name, f"a-{name}", f"10.0.0.{name[-1]}", "/py", "/p", gbps, True, False, None
    )


def test_small_groups_measure_every_ordered_pair_large_ones_a_ring() -> None:
    three = [host(f"h{i}") for i in range(1, 4)]
    mode, pairs = network.links(three)
    assert mode == "all_pairs" and len(pairs) == 6
    assert {(a.name, b.name) for a, b in pairs} >= {("h1", "h2"), ("h2", "h1"), ("h3", "h1")}
    nine = [host(f"h{i}") for i in range(1, 10)]
    mode, pairs = network.links(nine)
    assert mode == "ring" and len(pairs) == 18
    assert ("h9", "h1") in {(a.name, b.name) for a, b in pairs}


def test_iperf3_json_reads_received_throughput_and_errors() -> None:
    gbps, error = network.parse_iperf3((FIXTURES / "iperf3_3.12_loopback.json").read_text())
    assert error == "" and gbps == pytest.approx(10.48, abs=0.01)
    gbps, error = network.parse_iperf3((FIXTURES / "iperf3_3.12_refused.json").read_text())
    assert gbps is None and "unable to connect" in error
    assert network.parse_iperf3("iperf3: command not found")[0] is None


def test_ping_summary_reads_average_and_loss() -> None:
    assert network.parse_ping((FIXTURES / "ping_loopback.txt").read_text()) == (0.109, 0.0)
    assert network.parse_ping("ping: unknown host") == (None, None)


@pytest.mark.parametrize(
    ("gbps", "latency", "loss", "status", "words"),
    [
        (9.4, 0.05, 0.0, "pass", ""),
        (0.095, 0.05, 0.0, "fail", "0.095 Gbit/s < 7 (0.7 x the declared 10 Gbit/s)"),
        (9.4, 2.5, 0.0, "fail", "latency 2.5 ms > 1.0 ms"),
        (9.4, 0.05, 20.0, "fail", "20 % of pings lost"),
        (9.4, None, None, "fail", "no ping answer"),
    ],
)
def test_links_are_judged_against_the_declared_speed(
    gbps: float, latency: float | None, loss: float | None, status: str, words: str
) -> None:
    link = {"source": "h1", "target": "h2", "gbps": gbps, "latency_ms": latency, "loss_pct": loss}
    judged = network.judge_link(link, 10)
    assert judged["status"] == status and judged["floor_gbps"] == pytest.approx(7.0)
    assert words in judged["reason"] and (status == "pass") == (judged["reason"] == "")


def test_an_address_that_is_not_plain_never_reaches_a_remote_shell() -> None:
    assert network.plain_address("10.0.0.5") == "10.0.0.5"
    with pytest.raises(ValueError):
        network.plain_address("10.0.0.5;reboot")


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        ("iperf3: unable to connect to server: Connection refused", True),  # 3.12 (fixture)
        ("iperf3: error - unable to send control message: Bad file descriptor", True),  # 3.9
        ("iperf3: the server is busy running a test. try again later", False),
        ("iperf3 printed no JSON: 'iperf3: command not found'", False),
    ],
)
def test_a_server_not_listening_yet_is_retried_however_iperf3_words_it(
    error: str, retry: bool
) -> None:
    assert network.server_not_ready(error) is retry


def test_the_listening_check_is_a_real_shell_loop_that_ends(tmp_path: Path) -> None:
    """The wait for the server, run by a real sh with an `ss` stand-in: found, then not."""
    import subprocess

    fake = tmp_path / "ss"
    fake.write_text('#!/bin/sh\n[ -e "$(dirname "$0")/up" ] && echo "LISTEN 0 5 10.0.0.2:5201"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    script = network.listening_script(5201, 1)
    assert "sport = :5201" in script
    assert subprocess.run(["sh", "-c", script], env=env, timeout=10).returncode == 1
    (tmp_path / "up").touch()
    assert subprocess.run(["sh", "-c", script], env=env, timeout=10).returncode == 0


class ScriptedLauncher:
    """A launcher whose server listens at once and whose client answers as iperf3 3.9 did on
    the sandbox (an empty "end", the reason on stderr) until it answers with a measurement."""

    def __init__(self, client_answers: list[tuple[str, str]]) -> None:
        self.client_answers = client_answers
        self.calls: list[str] = []

    def run(self, host: ClusterHost, script: str, timeout: float = 60) -> tuple[int, str, str]:
        self.calls.append(script)
        if script.startswith("ip -j route get"):
            return 0, '[{"dev": "eth0"}]', ""
        if script.startswith("cat /sys/class/net/"):
            return 0, "1500\n", ""
        if "sport = :" in script:
            return 0, "", ""
        if script.startswith("iperf3 -J -c"):
            return (1, *self.client_answers.pop(0))
        return 0, (FIXTURES / "ping_loopback.txt").read_text(), ""

    def start(self, host: ClusterHost, label: str, argv: list[str]) -> object:
        class Serving:
            def finished(self) -> bool:
                return False

            def wait(self, timeout: float) -> tuple[int, str, str]:
                return 0, "", ""

        return Serving()

    def stop(self, host: ClusterHost, label: str) -> None:
        self.calls.append(f"stop {label}")


def test_a_client_too_early_for_iperf3_3_9_is_tried_again_after_the_server_listens() -> None:
    early = ('{"start": {}, "intervals": [], "end": {}}', "iperf3: error - unable to send "
             "control message: Bad file descriptor\n")  # fmt: skip
    measured = ((FIXTURES / "iperf3_3.12_loopback.json").read_text(), "")
    launcher = ScriptedLauncher([early, measured])
    link = network.measure_link(launcher, host("h1"), host("h2"))  # type: ignore[arg-type]
    assert link["gbps"] == pytest.approx(10.48, abs=0.01) and link["error"] == ""
    clients = [c for c in launcher.calls if c.startswith("iperf3 -J -c")]
    assert len(clients) == 2
    waited = next(i for i, c in enumerate(launcher.calls) if "sport = :" in c)
    assert waited < launcher.calls.index(clients[0])  # listening checked before the client
