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
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.cluster.config import IPERF3_PORT, WORKER_PORT
from gpufleet.cluster.schema import validate_cluster_results
from tests.integration.conftest import REPO, Sandbox, gpufleet, running_sandbox

pytestmark = pytest.mark.integration

INVENTORY = "inventories/sandbox.py"
HOSTS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
THROTTLED = "gfsb-h2"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# The Python worker itself, not the shell that started it (its line names the module too).
WORKER_PID = (
    "ps -eo pid=,comm=,args= | awk '$2 ~ /^python/ && /validation.cluster.worker/ {print $1}'"
)


@pytest.fixture(scope="module")
def fleet() -> Iterator[Sandbox]:
    """Three sandbox hosts, provisioned with the real deploy (iperf3 and ping included)."""
    with running_sandbox(3, standins=True) as sandbox:
        pyinfra = str(Path(sys.executable).with_name("pyinfra"))
        proc = subprocess.run(
            [pyinfra, "-y", INVENTORY, "deploy/gpu_node.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
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
