"""`gpufleet validate --scheduler slurm`: keep busy hosts' jobs, then drain/resume by the rule.

Slurm's commands run on each host itself over the validate run's own SSH settings (a slurmd
host has slurm-client and munge). A host with running jobs gets no speed workload (its figures
would measure the jobs, and the jobs would suffer): its workloads check is ``inconclusive``. So
does a host whose Slurm cannot be asked (munge or slurmctld down): its jobs are unknown, not
none (review finding 16).
After the run, a failing host is drained with ``gpufleet: <check>: <message>``; a passing one
is resumed only if gpufleet drained it (gpufleet.scheduler.rule).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryHost
from gpufleet.report.schema import overall_status, summarize
from gpufleet.scheduler.rule import Action, SchedulerError
from gpufleet.scheduler.slurm import Runner, Slurm

# The pytest -k expression that leaves out the speed workloads (validation/test_workloads.py).
NO_WORKLOADS = "not test_workloads"
BUSY_CHECK = "workloads::not_run_jobs_running"
UNKNOWN_CHECK = "workloads::not_run_jobs_unknown"
RunnerFor = Callable[[InventoryHost], Runner]


def node_name(host: InventoryHost) -> str:
    """The host's Slurm node name: its inventory name (as in the sandbox and most sites)."""
    return host.name


def default_runner_for(workdir: Path) -> RunnerFor:
    from gpufleet.scheduler.remote import ssh_runner

    def make(host: InventoryHost) -> Runner:
        return ssh_runner(host, Path(tempfile.mkdtemp(prefix="slurm-", dir=workdir)))

    return make


def running_jobs(host: InventoryHost, runner_for: RunnerFor) -> tuple[list[str], str]:
    """The host's running jobs, and a note when Slurm could not be asked (then: none known)."""
    try:
        return Slurm(runner_for(host)).running_jobs(node_name(host)), ""
    except SchedulerError as exc:
        return [], f"could not ask Slurm for the jobs on {host.name}: {exc}"


def select_for(jobs: list[str], select: str | None, unknown: bool = False) -> str | None:
    """The pytest -k of a busy host (or one whose jobs are ``unknown``): the user's selection
    without the workloads."""
    if not jobs and not unknown:
        return select
    return f"({select}) and {NO_WORKLOADS}" if select else NO_WORKLOADS


def mark_busy(document: dict[str, Any], jobs: list[str], unknown: str = "") -> dict[str, Any]:
    """Add the inconclusive workloads check of a host that kept its jobs (or whose jobs are
    unknown: ``unknown`` says why); status follows."""
    check = {
        "name": BUSY_CHECK,
        "status": "inconclusive",
        "message": f"inconclusive: Slurm job(s) {', '.join(jobs)} running on the host; speed "
        "workloads not run, the host keeps its jobs (validate it again when it is idle)",
        "figures": {"jobs": jobs},
        "duration_s": 0.0,
    }
    if unknown:
        check["name"] = UNKNOWN_CHECK
        check["message"] = (
            f"inconclusive: {unknown}, so its jobs are unknown; speed workloads not run, as on "
            "a busy host (validate it again once Slurm answers)"
        )
    checks = [*document["checks"], check]
    status = overall_status(checks, document["run_error"], document["schema_version"])
    return {**document, "checks": checks, "summary": summarize(checks), "status": status}


def failure_of(document: Mapping[str, Any]) -> tuple[str, str] | str | None:
    """The first failing check as ``(check, message)``; None when the run passed; a string
    saying why nothing is decided (an error or an unproven run proves nothing either way)."""
    if document["status"] == "pass":
        return None
    if document["status"] in ("fail",):
        for check in document["checks"]:
            if check["status"] in ("fail", "error"):
                return str(check["name"]), str(check.get("message") or check["status"])
    return f"run {document['status']}: neither drained nor resumed"


def apply(host: InventoryHost, document: Mapping[str, Any], runner_for: RunnerFor) -> str:
    """Drain or resume the host by the rule; what was done, for the run's output."""
    decided = failure_of(document)
    if isinstance(decided, str):
        return f"slurm: {host.name}: {decided}"
    try:
        passed = {str(c["name"]) for c in document["checks"] if c["status"] == "pass"}
        action: Action = Slurm(runner_for(host)).apply(node_name(host), decided, passed)
    except SchedulerError as exc:
        return f"slurm: {host.name}: could not apply the result: {exc}"
    return f"slurm: {action.why}"


class SlurmValidate:
    """The two points where `gpufleet validate` meets Slurm: before the runs, after them."""

    def __init__(
        self, workdir: Path, runner_for: RunnerFor | None = None, log: Callable[[str], None] = print
    ) -> None:
        self.runner_for = runner_for or default_runner_for(workdir)
        self.jobs: dict[str, list[str]] = {}
        self.unknown: dict[str, str] = {}  # run alias -> why Slurm could not be asked
        self.log = log

    def before(self, runs: Sequence[Any], select: str | None) -> dict[str, str | None]:
        """Per run alias, the pytest -k to use: busy hosts run no speed workload."""
        selects = {}
        for run in runs:
            jobs, note = running_jobs(run.host, self.runner_for)
            if note:
                self.log(f"slurm: {note}: no speed workload (its jobs are unknown)")
                self.unknown[run.alias] = note
            if jobs:
                self.log(f"slurm: {run.host.name} runs job(s) {', '.join(jobs)}: no speed workload")
            self.jobs[run.alias] = jobs
            selects[run.alias] = select_for(jobs, select, unknown=bool(note))
        return selects

    def after(self, runs: Sequence[Any]) -> None:
        """Mark busy hosts' runs, then drain or resume every host by its result."""
        for run in runs:
            if run.document is None:
                continue
            jobs = self.jobs.get(run.alias) or []
            unknown = self.unknown.get(run.alias, "")
            if (jobs or unknown) and not run.document["run_error"]:
                run.document = mark_busy(run.document, jobs, unknown)
            self.log(apply(run.host, run.document, self.runner_for))
