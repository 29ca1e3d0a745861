"""Slurm's job states as `validate --scheduler slurm` reads them: a flag such as COMPLETING
has not ended, a held job waits like a pending one (CI, stop 41)."""

from __future__ import annotations

from pathlib import Path

from gpufleet.scheduler.batch import JobOptions, JobState
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.slurm_jobs import NodeJob, SlurmJobs
from tests.unit.slurm_standin import RUN_ID, StandInSlurm, make_runs, results_tar, run_arguments


def test_a_job_seen_completing_is_waited_for_and_a_held_one_is_cancelled(tmp_path: Path) -> None:
    """CI, stop 41: sacct said COMPLETING (the epilog still ran) and the node was reported
    "did not run" although its suite passed. COMPLETING has not ended; a held job never starts."""
    slurm = StandInSlurm(
        {
            "gpu01": ["RUNNING", "COMPLETING", "COMPLETING", "COMPLETED"],
            "gpu02": ["REQUEUE_HOLD"],
        }
    )

    def shell(run: HostRun, command: str, stdin: bytes) -> tuple[int, bytes]:
        return (0, results_tar(run.host.name, "pass")) if command.startswith("cd -- ") else (0, b"")

    now = [0.0]
    runs = make_runs(tmp_path, ["gpu01", "gpu02"])
    jobs = [NodeJob(r, f"/spool/{RUN_ID}", "/opt/p/current", "/usr/bin/python3") for r in runs]
    SlurmJobs(
        slurm,
        shell,
        JobOptions(),
        start_wait_s=60,
        log=lambda _l: None,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + 30),
    ).run(jobs, **run_arguments(runs, lambda _n: None))
    passed, held = (run.document for run in runs)
    assert passed is not None and passed["status"] == "pass", passed
    assert passed["slurm_job"] == {"id": slurm.jobs["gpu01"], "state": "COMPLETED"}
    assert held is not None and "waited" in held["run_error"]
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", slurm.jobs["gpu02"]]]
    for state in ("COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"):
        assert not JobState("1", state).finished, state
