"""Issue 16 on the sandbox: `gpufleet validate --tier cluster` across 3 hosts.

The network between every pair (iperf3 over the sandbox bridge, judged against the sandbox's
declared 1 Gbit/s), MultiWorkerMirroredStrategy over gRPC RING on the hosts' CPUs, a link
throttled from the control side and the host behind it named, and a worker killed mid-run
that fails the tier and leaves nothing running on any host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.cluster.config import IPERF3_PORT, WORKER_PORT
from gpufleet.cluster.output import TEXTFILE
from gpufleet.cluster.schema import validate_cluster_results
from gpufleet.sandbox.network import veth_name
from tests.integration.conftest import REPO, Sandbox, first_deploy, gpufleet, running_sandbox

# Every test judges links by their speed: nothing of the sandbox-free tiers runs beside them.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quiet_machine")]

INVENTORY = "inventories/sandbox.py"
HOSTS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
THROTTLED = "gfsb-h2"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# The Python worker itself, not the shell that started it (its line names the module too).
WORKER_PID = (
    "ps -eo pid=,comm=,args= | awk '$2 ~ /^python/ && /validation.cluster.worker/ {print $1}'"
)


@pytest.fixture(scope="module")
def fleet(provisioned: str) -> Iterator[Sandbox]:
    """Three sandbox hosts booted on the provisioned snapshot (the real deploy, iperf3 and ping
    included), the deploy run once more to converge them."""
    with running_sandbox(3, standins=True, from_snapshot=provisioned) as sandbox:
        first_deploy(INVENTORY, "--parallel", "3")
        yield sandbox


def cluster_run(results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return gpufleet(
        "validate", INVENTORY, "--tier", "cluster", "--results-dir", str(results), *extra,
        check=False, timeout=900,
    )  # fmt: skip


def the_document(results: Path) -> dict:
    (path,) = (results / "cluster").glob("*/*.json")
    doc = json.loads(path.read_text())
    validate_cluster_results(doc)
    return doc


def leftovers(fleet: Sandbox) -> dict[str, str]:
    """What of the tier still runs or listens, per host (checked here, not by the tier)."""
    found = {}
    for host in HOSTS:
        proc = fleet.ssh(
            host,
            "ps -eo args= | grep -E '[v]alidation.cluster.worker|[i]perf3' ; "
            f"ss -Htln 'sport = :{WORKER_PORT}' ; ss -Htln 'sport = :{IPERF3_PORT}'; "
            "ls -d /tmp/gpufleet-cluster-* 2>/dev/null; true",
        )
        assert proc.returncode == 0, proc.stderr
        if proc.stdout.strip():
            found[host] = proc.stdout.strip()
    return found


def test_a_throttled_link_fails_the_tier_naming_its_host(fleet: Sandbox, tmp_path: Path) -> None:
    veth = veth_name(THROTTLED)
    tbf = ["tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", "100mbit"]
    subprocess.run([*tbf, "burst", "32kbit", "latency", "400ms"], check=True)
    try:
        proc = cluster_run(tmp_path)
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", veth, "root"], check=True)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = the_document(tmp_path)
    assert doc["status"] == "fail"
    network = next(c for c in doc["culprits"] if c["check"] == "network")
    assert network["hosts"] == [THROTTLED], network
    for link in doc["network"]["links"]:
        into_throttled = link["target"] == THROTTLED
        assert link["status"] == ("fail" if into_throttled else "pass"), link
        if into_throttled:
            assert link["gbps"] < 0.2 and "0.7" in link["reason"], link
    assert f"named: {THROTTLED}" in proc.stdout
    assert doc["training"]["status"] == "pass"  # the tiny job does not need 100 Mbit/s
    assert not leftovers(fleet)


def test_the_cluster_tier_passes_once_the_link_is_back(fleet: Sandbox, tmp_path: Path) -> None:
    started = time.monotonic()
    proc = cluster_run(tmp_path)
    wall_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = the_document(tmp_path)
    assert doc["status"] == "pass" and doc["culprits"] == []
    assert [h["interconnect_gbps"] for h in doc["hosts"]] == [1, 1, 1]
    links = doc["network"]["links"]
    assert doc["network"]["mode"] == "all_pairs" and len(links) == 6
    # the MTU the host's interface really has (the sandbox's veths follow this machine's)
    mtu = {h: int(fleet.ssh(h, "cat /sys/class/net/eth0/mtu").stdout) for h in HOSTS}
    # Healthy links are told from the 100 Mbit/s throttle above by a wide margin (3x), and a
    # veth's round trip from a WAN's; never by what a loaded 2-core machine happens to give.
    for link in links:
        assert link["gbps"] >= 0.3 and link["latency_ms"] < 5.0, link
        assert link["interface"] == "eth0" and link["mtu"] == mtu[link["source"]], link
    training = doc["training"]
    assert training["status"] == "pass" and training["identical_weights"] is True
    assert len({w["weights_sha256"] for w in training["workers"]}) == 1
    assert {w["implementation"] for w in training["workers"]} == {"ring"}
    assert {w["workers"] for w in training["workers"]} == {3}
    assert training["max_weight_diff_vs_single"] <= 1e-4
    assert training["speed"] == {"status": "not_applicable", "reason": "no GPU"}
    assert doc["nccl_tests"] == {"status": "skipped", "reason": "no GPU"}
    assert set(doc["cleanup"].values()) == {"clean"}
    # JUnit, HTML matrix, the terminal table
    junit_path = next((tmp_path / "junit").glob("cluster-*.xml"))
    (suite,) = ET.parse(junit_path).getroot().iter("testsuite")
    assert suite.get("name") == "cluster:sandbox" and suite.get("failures") == "0"
    html = next((tmp_path / "cluster" / "sandbox").glob("*.html")).read_text()
    assert html.count('<td class="pass"') >= 6 and "gfsb-h3</th>" in html
    assert "group sandbox (3 hosts)" in proc.stdout
    # Prometheus, on every host
    for host in HOSTS:
        text = fleet.ssh(host, f"cat {TEXTFILE_DIR}/{TEXTFILE}").stdout
        samples = {
            (s.name, s.labels.get("peer")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("gpufleet_cluster_ok", None)] == 1.0
        peers = {p for (name, p) in samples if name == "gpufleet_cluster_link_gbps"}
        assert peers == set(HOSTS) - {host}
    assert not leftovers(fleet)
    print(f"cluster tier, 3 hosts: {wall_s:.0f} s")


def start_long_run(results: Path) -> subprocess.Popen[str]:
    """A job too long to end by itself, on two of the hosts (--limit: a shorter network part)."""
    command = [sys.executable, "-m", "gpufleet.cli", "validate", INVENTORY, "--tier", "cluster",
               "--limit", "gfsb-h2", "--limit", "gfsb-h3",
               "--results-dir", str(results), "--cluster-steps", "1000000"]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def training_worker(fleet: Sandbox, host: str) -> str:
    """The PID of the host's worker once it trains (listening, then a few seconds more)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if fleet.ssh(host, f"ss -Htln 'sport = :{WORKER_PORT}'").stdout.strip():
            time.sleep(5)
            pid = fleet.ssh(host, WORKER_PID).stdout.split()
            if pid:
                return pid[0]
        time.sleep(1)
    raise AssertionError(f"no worker trained on {host} within 300 s")


def test_a_killed_worker_fails_the_tier_and_nothing_is_left(fleet: Sandbox, tmp_path: Path) -> None:
    proc = start_long_run(tmp_path)
    try:
        pid = training_worker(fleet, THROTTLED)
        fleet.ssh(THROTTLED, f"kill -KILL {pid}")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out[-4000:] + err[-2000:]
    doc = the_document(tmp_path)
    training = doc["training"]
    assert training["status"] == "fail"
    assert f"the worker on {THROTTLED} exited 137 (killed by signal 9)" in training["reason"]
    assert {"check": "training", "hosts": [THROTTLED]}.items() <= doc["culprits"][-1].items()
    assert set(doc["cleanup"].values()) == {"clean"}, doc["cleanup"]
    assert not leftovers(fleet)


def test_an_interrupted_run_stops_the_job_on_every_host(fleet: Sandbox, tmp_path: Path) -> None:
    proc = start_long_run(tmp_path)
    try:
        training_worker(fleet, "gfsb-h3")
        proc.terminate()  # SIGTERM, as a CI job's timeout sends it
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, out[-4000:] + err[-2000:]
    doc = the_document(tmp_path)
    assert doc["status"] == "error" and doc["run_error"].startswith("interrupted")
    assert set(doc["cleanup"].values()) == {"clean"}, doc["cleanup"]
    assert not leftovers(fleet)
