"""`validate --scheduler slurm` (issue 34 item 1): sbatch lines, sacct's answer, and a run of
three nodes (one passes, one's job is cancelled, one never starts) against stand-in Slurm."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufleet.inventory import InventoryHost
from gpufleet.report.schema import new_document
from gpufleet.scheduler import batch
from gpufleet.scheduler.batch import JobOptions, JobState
from gpufleet.scheduler.rule import SchedulerError
from gpufleet.scheduler.validate_hook import apply
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.progress import document_status
from gpufleet.validate.slurm_jobs import NodeJob, SlurmJobs, parse_show_job, stage_command
from tests.unit.slurm_standin import RUN_ID, StandInSlurm, make_runs, results_tar, run_arguments


def test_sbatch_line_is_one_exclusive_task_on_its_node_named_gpufleet() -> None:
    options = JobOptions(partition="gpu", reservation="maint", constraint="h100&ib")
    argv = batch.sbatch_argv("gpu07", RUN_ID, ["sh", "-c", "true"], "/spool/r1", options)
    assert argv[:2] == ["sbatch", "--parsable"]
    for flag in (
        f"--job-name=gpufleet-validate-{RUN_ID}",
        "--nodelist=gpu07",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        "--partition=gpu",
        "--reservation=maint",
        "--constraint=h100&ib",
        "--chdir=/spool/r1",
        "--output=/spool/r1/job.out",
    ):
        assert flag in argv, flag
    assert f"--comment=gpufleet validate {RUN_ID} gpu07" in argv
    assert argv[-1] == "--wrap=sh -c true"
    bare = batch.sbatch_argv("gpu07", RUN_ID, ["true"], "/s", JobOptions())
    assert not any(a.startswith(("--partition", "--reservation", "--constraint")) for a in bare)


def test_a_node_name_that_could_be_an_option_is_refused() -> None:
    with pytest.raises(SchedulerError, match="not a Slurm node name"):
        batch.sbatch_argv("-w", RUN_ID, ["true"], "/s", JobOptions())


def test_sbatch_answers_are_read_per_node() -> None:
    jobs, errors = batch.parse_submitted(
        "gpu01\t4211\ngpu02\t4212;gfsb\ngpu03\t!sbatch: error: Invalid node name specified\n"
        "gpu04\tnot a job\n"
    )
    assert jobs == {"gpu01": "4211", "gpu02": "4212"}
    assert errors["gpu03"] == "sbatch: error: Invalid node name specified"
    assert "gpu04" in errors


def test_sacct_states_are_read_with_their_who_and_requeues() -> None:
    assert batch.sacct_argv(["1", "2"]) == [
        "sacct",
        "-n",
        "-P",
        "-X",
        "-o",
        "JobID,State,NodeList",
        "-j",
        "1,2",
    ]
    jobs = batch.parse_sacct(
        "4211|COMPLETED|gpu01\n4212|CANCELLED by 0|gpu02\n4213|PENDING|None assigned\n"
        "4213|RUNNING|gpu03\nnoise\n"
    )
    assert jobs["4212"].state == "CANCELLED" and not jobs["4212"].ran and jobs["4212"].finished
    assert jobs["4213"].state == "RUNNING" and not jobs["4213"].finished
    assert jobs["4211"].ran


def test_scontrol_show_job_is_read_where_there_is_no_accounting() -> None:
    jobs = parse_show_job("JobId=7 JobName=x JobState=TIMEOUT Reason=None NodeList=gpu01\n")
    assert jobs == {"7": JobState("7", "TIMEOUT", "gpu01")}


def test_three_nodes_one_passes_one_cancelled_one_never_starts(tmp_path: Path) -> None:
    slurm = StandInSlurm(
        {
            "gpu01": ["RUNNING", "COMPLETED"],
            "gpu02": ["RUNNING", "CANCELLED by 0"],
            "gpu03": ["PENDING"],
        }
    )
    shell_calls: list[tuple[str, str, bytes]] = []

    def shell(run: HostRun, command: str, stdin: bytes) -> tuple[int, bytes]:
        shell_calls.append((run.host.name, command, stdin))
        if command.startswith("cd -- "):  # the gather
            return 0, results_tar(run.host.name, "pass")
        return 0, b""

    now = [0.0]
    finished: list[str] = []
    runs = make_runs(tmp_path, ["gpu01", "gpu02", "gpu03"])
    jobs = [
        NodeJob(
            r,
            f"/var/lib/gpufleet/slurm-validate/{RUN_ID}",
            "/opt/p/current",
            "/usr/local/bin/gpufleet-python",
        )
        for r in runs
    ]
    SlurmJobs(
        slurm,
        shell,
        JobOptions(partition="gpu"),
        start_wait_s=60,
        log=lambda _l: None,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + 30),
    ).run(jobs, **run_arguments(runs, finished.append))

    passed, cancelled, never = (run.document for run in runs)
    assert passed is not None and passed["status"] == "pass"
    assert passed["slurm_job"] == {"id": slurm.jobs["gpu01"], "state": "COMPLETED"}
    assert cancelled is not None and cancelled["status"] == "error"
    assert cancelled["did_not_run"] == {"job_id": slurm.jobs["gpu02"], "state": "CANCELLED"}
    assert cancelled["run_error"].startswith("did not run: Slurm job")
    assert never is not None and never["did_not_run"]["state"] == "CANCELLED"
    assert "waited" in never["run_error"]
    # only the job that never started was cancelled; every node finished exactly once
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", slurm.jobs["gpu03"]]]
    assert sorted(finished) == ["gpu01", "gpu02", "gpu03"]
    # one sbatch session for the three; each node's expectations staged, root-only
    assert sum(c[:2] == ["sh", "-c"] for c in slurm.calls) == 1
    staged = [c for c in shell_calls if c[1] == stage_command(jobs[0].spool)]
    # staged in parallel, one thread a node: the order of the calls is the threads'
    assert sorted((name, data) for name, _c, data in staged) == [
        (r.host.name, r.expectations_path.read_bytes()) for r in runs
    ]
    assert "umask 077" in staged[0][1]
    script = next(c for c in slurm.calls if c[:2] == ["sh", "-c"])[2]
    assert "--partition=gpu" in script and "testinfra.plugin" in script
    assert "--hosts=local://" in script and "/opt/p/current/validation" in script
    # the gather: results pulled only from the node whose suite ran
    gathered = [name for name, command, _d in shell_calls if command.startswith("cd -- ")]
    assert gathered == ["gpu01"]


def test_a_node_sbatch_refuses_is_an_error_and_its_neighbours_still_run(tmp_path: Path) -> None:
    def submit(argv: Sequence[str]) -> tuple[int, str]:
        if argv[:2] == ["sh", "-c"]:
            return 0, "gpu01\t!sbatch: error: Required node not available (down)\ngpu02\t88\n"
        return 0, "88|COMPLETED|gpu02\n"

    def shell(run: HostRun, command: str, stdin: bytes) -> tuple[int, bytes]:
        return 0, results_tar(run.host.name, "pass") if command.startswith("cd -- ") else b""

    runs = make_runs(tmp_path, ["gpu01", "gpu02"])
    jobs = [NodeJob(r, "/s/r", "/p", "/py") for r in runs]
    stand_in = SlurmJobs(submit, shell, JobOptions(), sleep=lambda s: None, log=lambda _l: None)
    stand_in.run(jobs, **run_arguments(runs, lambda _name: None))
    refused, ran = (run.document for run in runs)
    assert refused is not None and "Required node not available" in refused["run_error"]
    assert ran is not None and ran["status"] == "pass"


def test_a_did_not_run_node_is_neither_drained_nor_resumed() -> None:
    document = new_document(
        host="gpu02",
        run_id=RUN_ID,
        started_at="t",
        tier="quick",
        target="ssh://gpu02",
        spec={},
        checks=[],
        workloads=[],
        gpu_health=None,
        run_error="did not run: Slurm job 7 ...",
    )
    document["did_not_run"] = {"job_id": "7", "state": "CANCELLED"}
    asked: list[list[str]] = []

    def runner_for(_host: InventoryHost):
        return lambda argv: (asked.append(list(argv)), (0, ""))[1]

    said = apply(InventoryHost("gpu02", "ssh", "10.0.0.2"), document, runner_for)
    assert "neither drained nor resumed" in said
    assert asked == []  # scontrol never called
    assert document_status(document)[0] == "did-not-run"


def test_slurm_jobs_need_ssh_hosts_said_per_host_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufleet.commands import validate as validate_cmd

    code = validate_cmd.main(
        ["@local", "--scheduler", "slurm", "--dispatch", "jobs", "--results-dir", str(tmp_path)]
    )
    captured = capsys.readouterr()
    (path,) = [p for p in tmp_path.glob("@local/*.json") if not p.name.startswith("base")]
    document = json.loads(path.read_text())
    assert code == 2
    assert "Slurm jobs need hosts reached over SSH" in document["run_error"]
    assert "Traceback" not in captured.err + captured.out


def test_ssh_pool_defaults_to_every_host_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gpufleet.commands import validate as validate_cmd
    from gpufleet.validate import runner

    sizes: list[int] = []

    class Recording(ThreadPoolExecutor):
        def __init__(self, max_workers: int) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers=max_workers)

    def fake_run_host(run: HostRun, **_kwargs: object) -> None:
        run.document = new_document(
            host=run.host.name,
            run_id="r",
            started_at="t",
            tier="quick",
            target="local://",
            spec={},
            checks=[],
            workloads=[],
            gpu_health=None,
        )

    monkeypatch.setattr(runner, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(runner, "run_host", fake_run_host)
    assert validate_cmd.build_parser().parse_args(["@local"]).parallel is None
    validate_cmd.main(["@local", "-q", "--results-dir", str(tmp_path / "a")])
    validate_cmd.main(["@local", "-q", "--results-dir", str(tmp_path / "b"), "--parallel", "7"])
    assert sizes == [min(1, runner.MAX_PARALLEL), 7]


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
NO_ACCOUNTING = "Slurm accounting storage is disabled\n"  # sacct, exit 1 (SOURCES.md)
LIST_REFUSED = "slurm_load_jobs error: Invalid job id specified\n"  # scontrol show job 1,2,3


class NoAccountingSlurm:
    """A cluster without accounting storage, answering as the recorded Slurm 21.08.5 did:
    sacct refuses, ``scontrol -o show job ID,ID`` refuses the list, ``scontrol -o show job``
    lists every job it still knows (the recorded output, jobs 1-3 COMPLETED)."""

    def __init__(self, forget_after_polls: int | None = None) -> None:
        self.shown = (RECORDED / "scontrol-o-show-job-21.08.5.txt").read_text()
        self.polls = 0
        self.forget_after = forget_after_polls
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if argv[:2] == ["sh", "-c"]:
            nodes = re.findall(r"--nodelist=(\S+)", argv[2])
            return 0, "".join(f"{n}\t{i + 1}\n" for i, n in enumerate(nodes))
        if argv[0] == "sacct":
            return 1, NO_ACCOUNTING
        if list(argv[:4]) == ["scontrol", "-o", "show", "job"]:
            if len(argv) > 4:
                return 1, LIST_REFUSED
            self.polls += 1
            if self.polls == 1:  # the first poll: the jobs still run
                return 0, self.shown.replace("JobState=COMPLETED", "JobState=RUNNING")
            if self.forget_after is not None and self.polls > self.forget_after:
                return 0, ""  # MinJobAge passed: slurmctld lists them no more
            return 0, self.shown
        if argv[0] == "scancel":
            return 0, ""
        return 1, f"unexpected {argv}"


@pytest.mark.parametrize("forget", [None, 1], ids=["listed", "forgotten-after-running"])
def test_without_accounting_the_recorded_scontrol_answer_ends_every_job(
    tmp_path: Path, forget: int | None
) -> None:
    """The first sandbox run waited 300 s on jobs that had completed in 53 s and cancelled
    them: it asked ``scontrol show job 1,2,3``, which real Slurm refuses."""
    names = ["gfsb-h1", "gfsb-h2", "gfsb-h3"]
    runs = make_runs(tmp_path, names)
    slurm = NoAccountingSlurm(forget_after_polls=forget)

    def shell(run: HostRun, command: str, _stdin: bytes) -> tuple[int, bytes]:
        return (0, results_tar(run.host.name, "pass")) if command.startswith("cd -- ") else (0, b"")

    ended: list[str] = []
    slept: list[float] = []
    jobs = SlurmJobs(slurm, shell, JobOptions(), sleep=slept.append, log=lambda _m: None)
    spool, py = f"/var/lib/gpufleet/slurm-validate/{RUN_ID}", "/usr/local/bin/gpufleet-python"
    node_jobs = [NodeJob(r, spool, "/opt/p/current", py) for r in runs]
    jobs.run(node_jobs, **run_arguments(runs, ended.append))
    assert sorted(ended) == names
    assert all(r.document is not None and not r.document.get("did_not_run") for r in runs)
    assert [c for c in slurm.calls if c[0] == "scancel"] == []
    assert all(c == ["scontrol", "-o", "show", "job"] for c in slurm.calls if c[0] == "scontrol")
    assert len(slept) == 1  # one poll while they ran, then each was gathered
    want = "ENDED" if forget else "COMPLETED"
    assert {r.document["slurm_job"]["state"] for r in runs if r.document} == {want}
