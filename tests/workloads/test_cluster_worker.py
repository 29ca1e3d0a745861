"""The cluster job's worker, for real: three MultiWorkerMirroredStrategy workers on loopback
(gRPC RING on the CPU) end with the same weights as each other and as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pytest

from tests.ports import free_ports, lost_its_port

pytestmark = pytest.mark.workload

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--steps", "40", "--global-batch", "96"]


def worker(config: dict | None, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "PYTHONPATH": str(REPO)}
    env.pop("TF_CONFIG", None)
    if config is not None:
        env["TF_CONFIG"] = json.dumps(config)
    return subprocess.Popen(
        [sys.executable, "-m", "validation.cluster.worker", *ARGS, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def three_workers(tries: int = 3) -> list[dict]:
    """The documents of three workers on loopback ports. A port taken by someone else between
    picking it and a worker's bind is a new try on new ports (its peers, left waiting for it,
    are stopped)."""
    for _ in range(tries):
        workers = [f"127.0.0.1:{port}" for port in free_ports(3)]
        procs = [
            worker({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
            for i in range(3)
        ]
        with ThreadPoolExecutor(3) as pool:
            ends = {pool.submit(p.communicate, timeout=240): p for p in procs}
            outputs = {}
            for done in as_completed(ends):
                proc, (out, err) = ends[done], done.result()
                outputs[proc] = out
                if proc.returncode != 0 and lost_its_port(err):
                    for other in procs:
                        other.kill()
                    break
                assert proc.returncode == 0, err[-2000:]
            else:
                return [json.loads(outputs[p]) for p in procs]
    raise AssertionError(f"no three free ports in {tries} tries")


def test_three_workers_agree_with_each_other_and_with_one_process() -> None:
    docs = three_workers()
    single = result(worker(None))
    assert [d["task_index"] for d in docs] == [0, 1, 2]
    assert {d["workers"] for d in docs} == {3} and {d["replicas"] for d in docs} == {3}
    assert {d["implementation"] for d in docs} == {"ring"} and single["replicas"] == 1
    assert len({d["weights_sha256"] for d in docs}) == 1  # bit for bit
    assert docs[0]["final_loss"] < docs[0]["first_loss"]  # it trained
    diff = np.max(np.abs(np.array(docs[0]["weights"]) - np.array(single["weights"])))
    assert diff <= 1e-4
    assert abs(docs[0]["final_loss"] - single["final_loss"]) <= 1e-4 * single["final_loss"]


def test_a_different_global_batch_on_one_host_is_not_the_same_run() -> None:
    """The comparison can fail: a single run on another batch ends elsewhere."""
    a = result(worker(None))
    b = result(worker(None, "--global-batch", "64"))
    diff = np.max(np.abs(np.array(a["weights"]) - np.array(b["weights"])))
    assert diff > 1e-3
