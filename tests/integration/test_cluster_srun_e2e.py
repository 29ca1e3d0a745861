"""Issue 16 item 2 on the sandbox: the cluster tier's workers as srun jobs of a real Slurm.

`gpufleet sandbox up --hosts 3 --slurm` (slurmctld on the first host, slurmd on all three),
the whole deploy, then `gpufleet validate --tier cluster`: the inventory says
`scheduler: slurm`, so every worker and the single-host reference run are one-task exclusive
jobs on their own nodes. Takes about 4.5 minutes, so it runs on request (CI's time budget).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.cluster.schema import validate_cluster_results
from gpufleet.sandbox.state import load_state
from tests.integration.conftest import REPO, Sandbox, gpufleet

SRUN_E2E = "GPUFLEET_E2E_SRUN"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get(SRUN_E2E) != "1",
        reason=f"the ~4.5 min srun cluster e2e runs on request: {SRUN_E2E}=1 (CI's time budget)",
    ),
]
INVENTORY = "inventories/sandbox.py"


@pytest.fixture(scope="module")
def slurm_fleet() -> Iterator[Sandbox]:
    """Three Slurm nodes, provisioned with the whole deploy (TensorFlow, iperf3, Slurm stage)."""
    gpufleet("sandbox", "down", timeout=300)
    started = time.monotonic()
    try:
        gpufleet("sandbox", "up", "--hosts", "3", "--slurm", timeout=1200)
        pyinfra = str(Path(sys.executable).with_name("pyinfra"))
        proc = subprocess.run(
            [pyinfra, "-y", INVENTORY, "deploy/gpu_node.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "PYINFRA_PROGRESS": "off"},
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        print(f"\nslurm sandbox up and deployed: {time.monotonic() - started:.0f} s")
        yield Sandbox(load_state(), time.monotonic() - started, True)
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)


def test_the_cluster_tier_runs_its_workers_as_slurm_jobs(
    slurm_fleet: Sandbox, tmp_path: Path
) -> None:
    proc = gpufleet(
        "validate", INVENTORY, "--tier", "cluster", "--results-dir", str(tmp_path),
        check=False, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (path,) = (tmp_path / "cluster").glob("*/*.json")
    doc = json.loads(path.read_text())
    validate_cluster_results(doc)
    training = doc["training"]
    assert training["launcher"] == "srun" and training["status"] == "pass", training
    assert training["identical_weights"] is True
    assert set(doc["cleanup"].values()) == {"clean"}
    # Slurm ran them: 3 workers and the reference, named after the run, each on its own node
    name = f"gpufleet-cluster-{doc['run_id']}"
    jobs = slurm_fleet.ssh(0, f"scontrol -o show job | grep 'JobName={name} '").stdout
    lines = jobs.strip().splitlines()
    assert len(lines) == 4, jobs
    assert all("JobState=COMPLETED" in line for line in lines), jobs
    nodes = sorted(part.split("=", 1)[1] for line in lines for part in line.split()
                   if part.startswith("NodeList="))  # fmt: skip
    assert nodes == ["gfsb-h1", "gfsb-h1", "gfsb-h2", "gfsb-h3"], nodes
    states = slurm_fleet.ssh(0, "sinfo -h -N -o '%N %T'").stdout.split()
    assert states[1::2] == ["idle"] * 3, states
