"""`validate --scheduler slurm` on a node ssh cannot reach: "could not reach", exit 3 (review §3
row 13), as the ssh path says it."""

from __future__ import annotations

from pathlib import Path

from gpufleet.scheduler.batch import JobOptions
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.results import exit_status
from gpufleet.validate.slurm_jobs import NodeJob, SlurmJobs
from tests.unit.slurm_standin import StandInSlurm, make_runs, run_arguments


def test_a_node_ssh_cannot_reach_for_staging_is_unreachable_exit_3(tmp_path: Path) -> None:
    # Slurm staging on an unreachable host said "could not stage the job ... (exit 255)", exit 2
    def shell(run: HostRun, command: str, stdin: bytes) -> tuple[int, bytes]:
        return 255, b"ssh: connect to host 10.0.0.1 port 22: Connection refused\n"

    runs = make_runs(tmp_path, ["gpu01"])
    jobs = [NodeJob(r, "/s/r", "/p", "/py") for r in runs]
    stand_in = SlurmJobs(StandInSlurm({}), shell, JobOptions(), sleep=lambda s: None, log=print)
    stand_in.run(jobs, **run_arguments(runs, lambda _name: None))
    document = runs[0].document
    assert document is not None and document["status"] == "error"
    assert document["run_error"] == (
        "could not reach gpu01: ssh: connect to host 10.0.0.1 port 22: Connection refused"
    )
    assert exit_status([document]) == 3
