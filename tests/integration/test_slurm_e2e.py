"""Real Slurm on the sandbox: the cluster itself, the health check's drain/resume, rollouts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gpufleet.sandbox.image import MARKER, images_dir
from tests.integration.conftest import REPO, Sandbox, gpufleet

pytestmark = pytest.mark.integration
HOSTS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Sandbox]:
    """`gpufleet sandbox up --hosts 3 --slurm`, torn down after the module."""
    from gpufleet.sandbox.state import load_state

    cached = any(images_dir().glob(f"*/{MARKER}"))
    gpufleet("sandbox", "down", timeout=300)
    started = time.monotonic()
    try:
        gpufleet("sandbox", "up", "--hosts", str(HOSTS), "--slurm", timeout=1200)
        up_s = time.monotonic() - started
        print(f"\nsandbox up --hosts {HOSTS} --slurm: {up_s:.1f} s (image cached: {cached})")
        yield Sandbox(load_state(), up_s, cached)
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)


def on_controller(cluster: Sandbox, command: str, timeout: float = 120) -> str:
    proc = cluster.ssh(0, command, timeout=timeout)
    assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"
    return proc.stdout


def test_every_host_is_an_idle_slurm_node(cluster: Sandbox) -> None:
    out = on_controller(cluster, "sinfo -h -N -o '%N %T %G'")
    nodes = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert sorted(nodes) == [h.name for h in cluster.state.hosts]
    for node, (state, gres) in nodes.items():
        assert state == "idle", f"{node}: {state}"
        assert gres.startswith("gpu:2"), f"{node} declares {gres}"


def test_srun_runs_on_every_host(cluster: Sandbox) -> None:
    out = on_controller(cluster, f"srun -N{HOSTS} --ntasks-per-node=1 hostname", timeout=60)
    assert sorted(out.split()) == [h.name for h in cluster.state.hosts]


def test_sbatch_job_with_a_gpu_runs_on_the_host_asked_for(cluster: Sandbox) -> None:
    target = cluster.state.hosts[-1].name
    job = on_controller(
        cluster,
        f"sbatch --parsable -w {target} --gres=gpu:1 -o /tmp/gf-job.out "
        "--wrap 'hostname; echo gpus=$CUDA_VISIBLE_DEVICES'",
    ).strip()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not on_controller(cluster, f"squeue -h -j {job}").strip():
            break
        time.sleep(1)
    out = cluster.ssh(target, "cat /tmp/gf-job.out").stdout.split()
    assert out[:1] == [target], f"job {job}: {out}"
    assert out[1] == "gpus=0", out


def test_inventory_says_slurm_and_names_the_controller(cluster: Sandbox) -> None:
    code = (
        "import runpy, json; ns = runpy.run_path('inventories/sandbox.py');"
        "print(json.dumps(ns['sandbox'][1]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=os.environ
    )
    assert proc.returncode == 0, proc.stderr
    assert '"scheduler": "slurm"' in proc.stdout
    assert f'"slurm_controller": "{cluster.state.hosts[0].address}"' in proc.stdout
