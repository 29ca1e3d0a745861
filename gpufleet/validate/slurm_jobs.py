"""`gpufleet validate --scheduler slurm`: the suite as one exclusive Slurm job per node.

The control node only dispatches and gathers: over SSH it puts each node's expectations in
its spool (``slurm_spool_dir/<run id>/``, root-only), submits every job in one session on the
submit host (``sbatch --parsable``, gpufleet.scheduler.batch), follows them with ``sacct``
(or ``scontrol show job`` where Slurm keeps no accounting), and fetches each node's results
as its job ends. A job that never ran, or ended before the suite did, is "did not run".
"""

from __future__ import annotations

import io
import shlex
import tarfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gpufleet.scheduler import batch
from gpufleet.scheduler.batch import JobOptions, JobState
from gpufleet.scheduler.rule import SchedulerError
from gpufleet.scheduler.slurm import Runner
from gpufleet.validate.hostrun import HostRun, error_document
from gpufleet.validate.results import UNREACHED
from gpufleet.validate.suite import load_document, suite_arguments

# How often sacct is asked while jobs run, and how long a job may wait for its node (busy,
# drained, down) before it is cancelled and its node reported "did not run".
POLL_S = 5.0
DEFAULT_START_WAIT_S = 300
# Nodes submitted per SSH session on the submit host (each sbatch takes tens of ms).
SUBMIT_CHUNK = 100
SSH_FAILED = 255  # ssh(1): the exit status of a connection or login that failed
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Node shell: (run, shell command, stdin) -> (exit status, stdout bytes).
NodeShell = Callable[[HostRun, str, bytes], tuple[int, bytes]]


@dataclass
class NodeJob:
    """One node's job: where its files are on the node, its job ID, what sacct last said."""

    run: HostRun
    spool: str
    payload: str
    python: str
    job_id: str | None = None
    state: JobState | None = None
    done: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def wrap_command(job: NodeJob, arguments: Sequence[str]) -> list[str]:
    """The job's command: pytest on the node itself (``local://``), its exit status saved."""
    pythonpath = f"{job.payload}:{job.payload}/runner"
    pytest = shlex.join(
        [
            "env",
            f"PATH={NODE_PATH}",
            f"PYTHONPATH={pythonpath}",
            "PYTHONDONTWRITEBYTECODE=1",
            # runner/ has no dist-info, so no entry point: testinfra's plugin is named
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
            job.python,
            "-m",
            "pytest",
            "-p",
            "testinfra.plugin",
            f"{job.payload}/validation",
            *arguments,
        ]
    )
    return ["sh", "-c", f"{pytest}; echo $? > exit"]


def node_arguments(
    job: NodeJob, *, tier: str, run_id: str, select: str | None, checks: tuple[str, ...]
) -> list[str]:
    """The same pytest arguments as over SSH, with the node's own spool paths."""
    paths = (
        f"{job.spool}/expectations.json",
        f"{job.spool}/results.json",
        f"{job.spool}/junit.xml",
    )
    return suite_arguments(
        job.run, "local://", paths, tier=tier, run_id=run_id, select=select, checks=checks
    )


def stage_command(spool: str) -> str:
    """Make the run's root-only spool and write the expectations (stdin) there."""
    quoted = shlex.quote(spool)
    return (
        f"umask 077 && mkdir -p -- {quoted} && chmod 700 -- {quoted} && "
        f"cat > {quoted}/expectations.json"
    )


def gather_command(spool: str) -> str:
    """The job's files as a tar on stdout, then the spool (expectations included) removed."""
    quoted = shlex.quote(spool)
    return (
        f"cd -- {quoted} && tar -cf - --ignore-failed-read results.json junit.xml job.out "
        f"exit 2>/dev/null; cd / && rm -rf -- {quoted}"
    )


def unpack(job: NodeJob, data: bytes) -> None:
    """Put the gathered files where the SSH path's pytest would have written them."""
    targets = {
        "results.json": job.run.results_path,
        "junit.xml": job.run.junit_path,
        "job.out": job.run.log_path,
    }
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is None:
                    continue
                content = handle.read()
                if member.name == "exit":
                    text = content.decode(errors="replace").strip()
                    job.run.returncode = int(text) if text.isdigit() else None
                elif member.name in targets:
                    targets[member.name].write_bytes(content)
    except tarfile.TarError:
        return


def states_of(submit: Runner, jobs: Sequence[str]) -> dict[str, JobState]:
    """Every job's state: sacct, or (no accounting storage) slurmctld's own view.

    ``scontrol show job`` takes one job ID, not a list ("slurm_load_jobs error: Invalid job
    id specified" for ``1,2,3``, Slurm 21.08), so it is asked for every job it knows and the
    answer kept to ours. It forgets a job MinJobAge (300 s by default) after the job ends.
    """
    status, out = submit(batch.sacct_argv(jobs))
    if status == 0:
        return batch.parse_sacct(out)
    if "accounting storage is disabled" not in out:
        raise SchedulerError(f"sacct exited {status}: {out.strip()[:300]}")
    status, out = submit(["scontrol", "-o", "show", "job"])
    if status != 0 and "JobId=" not in out:
        raise SchedulerError(f"scontrol show job exited {status}: {out.strip()[:300]}")
    wanted = set(jobs)
    return {job: state for job, state in parse_show_job(out).items() if job in wanted}


def parse_show_job(text: str) -> dict[str, JobState]:
    """Jobs from ``scontrol -o show job`` (one line per job: ``JobId=.. JobState=..``)."""
    found = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "JobId" in fields and "JobState" in fields:
            found[fields["JobId"]] = JobState(
                fields["JobId"], fields["JobState"].upper(), fields.get("NodeList", "")
            )
    return found


class SlurmJobs:
    """Dispatch and gather one validate run's jobs (I/O through `submit` and `shell`)."""

    def __init__(
        self,
        submit: Runner,
        shell: NodeShell,
        options: JobOptions,
        *,
        start_wait_s: int = DEFAULT_START_WAIT_S,
        log: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        parallel: int = 64,
    ) -> None:
        self.submit, self.shell, self.options = submit, shell, options
        self.start_wait_s, self.log = start_wait_s, log
        self.clock, self.sleep, self.parallel = clock, sleep, max(1, parallel)

    def run(
        self,
        jobs: Sequence[NodeJob],
        *,
        tier: str,
        run_id: str,
        started_at: str,
        select: dict[str, str | None],
        checks: tuple[str, ...],
        asked: str | None,
        finished: Callable[[HostRun], None],
    ) -> None:
        """Every job's run ends with a document; ``finished`` is called as each one does."""

        def refuse(job: NodeJob, why: str, **extra: Any) -> None:
            job.run.document = error_document(
                job.run, tier=tier, run_id=run_id, started_at=started_at, why=why
            )
            job.run.document.update(extra)
            job.done = True
            finished(job.run)

        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            staged = list(pool.map(self._stage, jobs))
        ready = []
        for job, problem in zip(jobs, staged, strict=True):
            if problem:
                refuse(job, problem)
            else:
                ready.append(job)
        if not ready:
            return
        lines = {}
        for job in ready:
            args = node_arguments(
                job, tier=tier, run_id=run_id, select=select[job.run.alias], checks=checks
            )
            lines[job.run.host.name] = batch.sbatch_argv(
                job.run.host.name, run_id, wrap_command(job, args), job.spool, self.options
            )
        ids, errors = self._submit(lines)
        waiting = []
        for job in ready:
            job.job_id = ids.get(job.run.host.name)
            if job.job_id is None:
                why = errors.get(job.run.host.name) or "no answer"
                refuse(job, f"Slurm did not take {job.run.host.name}'s job: sbatch: {why}")
            else:
                self.log(f"slurm: {job.run.host.name}: job {job.job_id} submitted")
                waiting.append(job)

        def gather(job: NodeJob) -> None:
            self._gather(job)
            load_document(
                job.run,
                tier=tier,
                run_id=run_id,
                started_at=started_at,
                select=select[job.run.alias],
                checks=checks,
                asked=asked,
            )
            if job.run.document is not None and job.state is not None:
                job.run.document["slurm_job"] = {"id": job.job_id, "state": job.state.state}
            job.done = True
            finished(job.run)

        self._follow(waiting, pool_gather=gather, refuse=refuse)

    def _submit(self, lines: dict[str, list[str]]) -> tuple[dict[str, str], dict[str, str]]:
        """sbatch for every node, SUBMIT_CHUNK nodes per SSH session on the submit host."""
        ids: dict[str, str] = {}
        errors: dict[str, str] = {}
        nodes = list(lines)
        for start in range(0, len(nodes), SUBMIT_CHUNK):
            chunk = {n: lines[n] for n in nodes[start : start + SUBMIT_CHUNK]}
            status, out = self.submit(["sh", "-c", batch.submit_script(chunk)])
            found, refused = batch.parse_submitted(out)
            ids.update(found)
            errors.update(refused)
            for node in chunk:
                if node not in found and node not in refused:
                    errors[node] = f"the submit host answered exit {status}: {out.strip()[:200]}"
        return ids, errors

    def _stage(self, job: NodeJob) -> str:
        document = job.run.expectations_path.read_bytes()
        try:
            status, out = self.shell(job.run, stage_command(job.spool), document)
        except OSError as exc:
            return f"could not stage the job on {job.run.host.name}: {exc}"
        text = out.decode(errors="replace").strip()[:300]
        if status == SSH_FAILED:  # ssh's own failure, not the command's: the host is not reached
            return f"{UNREACHED}{job.run.host.name}: {text}"
        if status != 0:
            return f"could not stage the job on {job.run.host.name} (exit {status}): {text}"
        return ""

    def _gather(self, job: NodeJob) -> None:
        try:
            _status, out = self.shell(job.run, gather_command(job.spool), b"")
        except OSError:
            return
        unpack(job, out)

    def _follow(
        self,
        jobs: list[NodeJob],
        *,
        pool_gather: Callable[[NodeJob], None],
        refuse: Callable[..., None],
    ) -> None:
        """Poll until every job ended; gather each as it ends, cancel those that never start."""
        started = self.clock()
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            futures = []
            while any(not j.done and j.job_id for j in jobs):
                active = [j for j in jobs if not j.done and j.extra.get("gathering") is None]
                if not active:
                    break
                try:
                    states = states_of(self.submit, [str(j.job_id) for j in active])
                except SchedulerError as exc:
                    for job in active:
                        refuse(
                            job,
                            f"did not run: could not follow Slurm job {job.job_id}: {exc}",
                            did_not_run={"job_id": job.job_id, "state": "UNKNOWN"},
                        )
                    break
                waited = int(self.clock() - started)
                late = []
                for job in active:
                    seen_before = job.state is not None
                    job.state = states.get(str(job.job_id), job.state)
                    state = job.state
                    forgotten = seen_before and str(job.job_id) not in states
                    if forgotten and state is not None:
                        # Without accounting nothing keeps its final state: "ENDED".
                        job.state = state = JobState(state.job_id, "ENDED", state.nodes)
                    if (state is not None and state.ran) or forgotten:
                        # A job slurmctld no longer lists has ended (MinJobAge): its own
                        # files on the node say how the suite went, or that it never did.
                        job.extra["gathering"] = True
                        futures.append(pool.submit(pool_gather, job))
                    elif state is not None and state.finished:
                        why = batch.did_not_run_reason(state, job.run.host.name)
                        refuse(job, why, did_not_run={"job_id": job.job_id, "state": state.state})
                    elif (state is None or state.state in batch.WAITING_STATES) and (
                        waited >= self.start_wait_s
                    ):
                        late.append(job)
                if late:
                    self._cancel(late, waited, refuse)
                if any(not j.done and j.extra.get("gathering") is None for j in jobs):
                    self.sleep(POLL_S)
            for future in futures:
                future.result()

    def _cancel(self, late: list[NodeJob], waited: int, refuse: Callable[..., None]) -> None:
        self.submit(["scancel", *[str(j.job_id) for j in late]])
        for job in late:
            state = job.state or JobState(str(job.job_id), "PENDING")
            why = batch.did_not_run_reason(
                JobState(state.job_id, "PENDING"), job.run.host.name, waited_s=waited
            )
            refuse(job, why, did_not_run={"job_id": job.job_id, "state": "CANCELLED"})
