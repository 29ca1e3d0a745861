"""The cluster tier on a Slurm partition: workers as srun jobs, their key, their clean-up.

srun and scancel do not exist here; the shell lines run in a real sh with stand-ins for them
(named as such) that record what they were given, so quoting and order are what a host runs.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.cluster import launcher, srun, training
from gpufleet.cluster.config import ClusterHost, cluster_host, tf_config
from gpufleet.inventory import InventoryHost
from gpufleet.spec import NodeSpec, SpecError

RUN = "20261201T120000Z-abc123"


def host(name: str = "gpu-a", **changes: object) -> ClusterHost:
    plain = ClusterHost(name, "gpufleet-000", "10.0.0.5", "/py", "/p", 10, True, False, None)
    return replace(plain, **{"slurm": True, **changes})  # type: ignore[arg-type]


def test_a_worker_becomes_a_one_task_exclusive_job_on_its_own_node() -> None:
    argv = srun.srun_argv(host(), RUN, ["/py", "-m", "validation.cluster.worker"])
    assert argv[:10] == [
        "srun",
        f"--job-name=gpufleet-cluster-{RUN}",
        "--nodelist=gpu-a",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        "--immediate=30",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--quiet",
    ]
    assert argv[10:] == ["/py", "-m", "validation.cluster.worker"]  # no partition, no GPUs


def test_a_gpu_host_asks_for_its_gpus_and_the_partition_named() -> None:
    gpu = host(gpu_less=False, gpu_count=8, slurm_partition="a100")
    argv = srun.srun_argv(gpu, RUN, ["/py"])
    assert argv[-3:] == ["--partition=a100", "--gres=gpu:8", "/py"]


def test_a_run_id_that_is_not_plain_never_names_a_job() -> None:
    with pytest.raises(ValueError, match="not letters, digits"):
        srun.srun_argv(host(), "x;scancel -u root", ["/py"])


@pytest.mark.parametrize("value", ["gpu;reboot", "-p x", "$(id)", "a b", "x" * 65])
def test_slurm_partition_refuses_what_is_not_a_partition_name(value: str) -> None:
    with pytest.raises(SpecError, match="slurm_partition"):
        NodeSpec.from_host_data({"slurm_partition": value})


def test_the_inventory_scheduler_decides_the_launcher() -> None:
    data = {"gpu_less": True, "scheduler": "slurm", "slurm_partition": "debug"}
    on_slurm = cluster_host(InventoryHost("gfsb-h1", "ssh", "10.0.0.5", data=data), "a")
    assert on_slurm.slurm and on_slurm.slurm_partition == "debug"
    plain = cluster_host(InventoryHost("gfsb-h2", "ssh", "10.0.0.6", data={"gpu_less": True}), "b")
    assert not plain.slurm


def stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_worker_line_a_host_runs_hands_srun_the_worker_and_tf_config(tmp_path: Path) -> None:
    """background_script + srun_argv in a real sh; the srun stand-in records its arguments
    and TF_CONFIG, then runs the command after its options, as srun runs the task."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(
        bin_dir,
        "srun",
        f'printf "%s\\n" "$@" > {tmp_path}/args; printf "%s" "$TF_CONFIG" > {tmp_path}/tf\n'
        'while [ "${1#--}" != "$1" ]; do shift; done; exec "$@"\n',
    )
    hosts = [host("gpu-a"), host("gpu-b")]
    argv = srun.srun_argv(hosts[1], RUN, ["sh", "-c", "echo worker ran"])
    env = {"TF_CONFIG": tf_config(hosts, 1), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    script = launcher.background_script(str(tmp_path / "run"), "tf-worker", argv, env)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and done.stdout == "worker ran\n", done.stderr
    assert (tmp_path / "args").read_text().splitlines()[:2] == [
        f"--job-name=gpufleet-cluster-{RUN}",
        "--nodelist=gpu-b",
    ]
    assert json.loads((tmp_path / "tf").read_text())["task"] == {"type": "worker", "index": 1}


def test_the_clean_up_cancels_the_runs_jobs_and_waits_for_the_worker(tmp_path: Path) -> None:
    """The scancel stand-in records its arguments and ends the stand-in worker, as Slurm
    ends a cancelled job's task; the line returns once the worker is gone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    worker = subprocess.Popen(
        ["sh", "-c", "exec -a 'python -m validation.cluster.worker' sleep 60"],
    )
    stand_in(bin_dir, "scancel", f'echo "$@" > {tmp_path}/scancel; kill {worker.pid}\n')
    try:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
        script = srun.cancel_script(RUN)
        done = subprocess.run(["sh", "-c", script], env=env, timeout=30)
        assert done.returncode == 0
        assert (tmp_path / "scancel").read_text().split() == [
            "--quiet",
            f"--name=gpufleet-cluster-{RUN}",
        ]
        assert worker.wait(5) is not None
    finally:
        worker.kill()


class RecordingLauncher:
    """Starts nothing: records each worker's argv and answers with a worker document."""

    run_id = RUN

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def start(self, host: ClusterHost, label: str, argv: list[str], env: dict) -> object:
        self.argvs.append(list(argv))
        document = {"weights_sha256": "s", "weights": [0.0], "final_loss": 1.0,
                    "examples_per_s": 1.0}  # fmt: skip

        class Done:
            def finished(self) -> bool:
                return True

            def wait(self, timeout: float) -> tuple[int, str, str]:
                return 0, json.dumps(document), ""

        done = Done()
        done.host, done.label = host, label  # type: ignore[attr-defined]
        return done

    def stop(self, host: ClusterHost, label: str) -> None:
        raise AssertionError("nothing failed: nothing to stop")


@pytest.mark.parametrize("on_slurm", [True, False])
def test_the_job_goes_through_srun_only_on_slurm_hosts(on_slurm: bool) -> None:
    hosts = [host("gpu-a", slurm=on_slurm), host("gpu-b", slurm=on_slurm)]
    recording = RecordingLauncher()
    outcome = training.run_job(recording, hosts, steps=2, step="dense_regression")  # type: ignore[arg-type]
    assert not outcome.failure and set(outcome.documents) == {"gpu-a", "gpu-b"}
    firsts = [argv[0] for argv in recording.argvs]
    assert firsts == (["srun", "srun"] if on_slurm else ["/py", "/py"])
    assert all(argv[-8:-6] == ["-m", "validation.cluster.worker"] for argv in recording.argvs)
    section = training.judge(outcome, outcome, hosts)
    assert section["launcher"] == ("srun" if on_slurm else "ssh")
