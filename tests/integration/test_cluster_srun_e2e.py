"""Issue 16 item 2 on the sandbox: the cluster tier's workers as srun jobs of a real Slurm.

`gpufleet sandbox up --hosts 3 --slurm` (slurmctld on the first host, slurmd on all three),
on hosts booted on the session's provisioned snapshot, the whole deploy, then `gpufleet validate
--tier cluster`: the inventory says `scheduler: slurm`, so every worker and the single-host
reference run are one-task exclusive jobs on their own nodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.cluster.schema import validate_cluster_results
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, first_deploy, gpufleet, running_sandbox

# The tier judges links by their speed: nothing of the sandbox-free tiers runs beside it.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quiet_machine")]
INVENTORY = "inventories/sandbox.py"


@pytest.fixture(scope="module")
def slurm_fleet(provisioned: str) -> Iterator[Sandbox]:
    """Three Slurm nodes booted on the provisioned snapshot, the whole deploy run again (it now
    adds the Slurm stage)."""
    started = time.monotonic()
    with running_sandbox(3, standins=True, slurm=True, from_snapshot=provisioned) as sandbox:
        first_deploy(INVENTORY, "--parallel", "3")
        print(f"\nslurm sandbox up and deployed: {time.monotonic() - started:.0f} s")
        yield sandbox


def test_the_cluster_tier_runs_its_workers_as_slurm_jobs(
    slurm_fleet: Sandbox, tmp_path: Path
) -> None:
    proc = gpufleet(
        "validate", INVENTORY, "--tier", "cluster", "--results-dir", str(tmp_path),
        check=False, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, pyinfra_cli.failure(proc)
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
