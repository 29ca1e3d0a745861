"""Validation as Slurm batch jobs: one exclusive job per node, sbatch lines, sacct's answer.

Pure functions (no I/O). One job per node rather than a job array: an array's tasks share one
set of options, so no task can be pinned to its own node (``--nodelist`` would ask every task
for every node), and a single ``srun --nodes=N`` step lives and dies as one allocation. A job
per node has its own job ID and its own ``sacct`` State, so a node whose job was cancelled,
preempted or never started is told apart from the others.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.scheduler.rule import SchedulerError, check_node_name

JOB_PREFIX = "gpufleet-validate-"
SACCT_FORMAT = "JobID,State,NodeList"
# Slurm's job states as gpufleet reads them (job_state_string in Slurm's
# src/common/slurm_protocol_defs.c; sacct(1) and squeue(1), JOB STATE CODES). A job whose
# state carries a flag such as COMPLETING is shown by the flag alone, and has not ended yet:
# sacct reports COMPLETING while the node's epilog still runs, before COMPLETED or FAILED.
WAITING_STATES = frozenset({"PENDING", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
RUNNING_STATES = WAITING_STATES | frozenset(
    {
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "STAGE_OUT",
        "SIGNALING",
        "STOPPED",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
    }
)
# The suite ran to its end; pytest's exit status 1 (a failed check) makes the job FAILED.
RAN_STATES = frozenset({"COMPLETED", "FAILED"})
# The job ended before the suite could finish, or never started: "did not run".
NOT_RUN_STATES = frozenset(
    {
        "CANCELLED",
        "BOOT_FAIL",
        "DEADLINE",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "TIMEOUT",
    }
)
_JOB_ID = re.compile(r"[0-9]{1,12}")
_RUN_ID = re.compile(r"[0-9A-Za-z-]{1,40}")


@dataclass(frozen=True)
class JobOptions:
    """Where the jobs may run: partition, reservation, node features, time limit."""

    partition: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    time_limit_min: int = 30


@dataclass(frozen=True)
class JobState:
    """One job as sacct reports it: ``JobState("4211", "CANCELLED", "gfsb-h2")``."""

    job_id: str
    state: str
    nodes: str = ""

    @property
    def finished(self) -> bool:
        return self.state not in RUNNING_STATES

    @property
    def ran(self) -> bool:
        """The suite ran to its end on the node (its results say how it went)."""
        return self.state in RAN_STATES


def job_name(run_id: str) -> str:
    """The name every job of one validate run carries (what scancel --name cancels)."""
    if not _RUN_ID.fullmatch(run_id):
        raise SchedulerError(f"run id {run_id!r} cannot name a Slurm job")
    return f"{JOB_PREFIX}{run_id}"


def sbatch_argv(
    node: str, run_id: str, command: Sequence[str], folder: str, options: JobOptions
) -> list[str]:
    """``sbatch --parsable`` of ``command`` as one exclusive task on ``node`` alone, run in
    ``folder`` on the node (its output in ``folder/job.out``).

    Example: ``sbatch_argv("gpu07", "20261201T120000Z-abc123", ["true"], "/spool/r1",
    JobOptions())[:2] == ["sbatch", "--parsable"]``
    """
    node = check_node_name(node)
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(run_id)}",
        f"--comment=gpufleet validate {run_id} {node}",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        f"--time={max(1, options.time_limit_min)}",
        f"--chdir={folder}",
        f"--output={folder}/job.out",
        "--export=NONE",
    ]
    if options.partition:
        argv.append(f"--partition={options.partition}")
    if options.reservation:
        argv.append(f"--reservation={options.reservation}")
    if options.constraint:
        argv.append(f"--constraint={options.constraint}")
    return [*argv, f"--wrap={shlex.join(command)}"]


def submit_script(lines: Mapping[str, Sequence[str]]) -> str:
    """One shell script that submits every node's job and prints ``node<TAB>job id`` (or
    ``node<TAB>!<sbatch's error>``) per node: one SSH session for the whole fleet."""
    parts = []
    for node, argv in lines.items():
        name = shlex.quote(check_node_name(node))
        parts.append(
            f"if out=$({shlex.join(argv)} 2>&1); then printf '%s\\t%s\\n' {name} \"$out\"; "
            f"else printf '%s\\t!%s\\n' {name} \"$(echo $out)\"; fi"
        )
    return "\n".join(parts) + "\n"


def parse_submitted(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(job ID per node, sbatch's error per node) from `submit_script`'s output.

    ``sbatch --parsable`` prints ``jobid`` or ``jobid;cluster``; anything else is an error.
    """
    jobs: dict[str, str] = {}
    errors: dict[str, str] = {}
    for line in text.splitlines():
        node, tab, answer = line.partition("\t")
        if not tab or not node:
            continue
        job = answer.strip().split(";", 1)[0]
        if answer.startswith("!") or not _JOB_ID.fullmatch(job):
            errors[node] = answer.removeprefix("!").strip() or "sbatch printed nothing"
        else:
            jobs[node] = job
    return jobs, errors


def sacct_argv(job_ids: Iterable[str]) -> list[str]:
    """``sacct -n -P -X -o JobID,State,NodeList -j ID,...``: one line per job, no steps."""
    ids = [j for j in job_ids if _JOB_ID.fullmatch(j)]
    if not ids:
        raise SchedulerError("no job to ask sacct about")
    return ["sacct", "-n", "-P", "-X", "-o", SACCT_FORMAT, "-j", ",".join(ids)]


def parse_sacct(text: str) -> dict[str, JobState]:
    """Jobs from ``sacct -n -P -X -o JobID,State,NodeList``; ``CANCELLED by 0`` reads as
    CANCELLED. A job listed twice (a requeue) keeps its last line."""
    jobs: dict[str, JobState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not _JOB_ID.fullmatch(parts[0]):
            continue
        state = (parts[1].split() or ["UNKNOWN"])[0].upper().rstrip("+")
        jobs[parts[0]] = JobState(parts[0], state, parts[2] if len(parts) > 2 else "")
    return jobs


def did_not_run_reason(job: JobState | None, node: str, waited_s: int | None = None) -> str:
    """Why a node's suite did not run, for its results and the run's output."""
    if job is None:
        return f"did not run: Slurm has no record of {node}'s job"
    if job.state == "PENDING" and waited_s is not None:
        return (
            f"did not run: Slurm job {job.job_id} waited {waited_s} s for {node} (busy, "
            "drained or down) and was cancelled; validate it when the node is free"
        )
    return (
        f"did not run: Slurm job {job.job_id} on {node} ended {job.state} before the suite "
        "finished (sacct)"
    )
