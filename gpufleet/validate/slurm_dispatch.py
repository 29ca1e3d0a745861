"""Glue of `validate --scheduler slurm`: the submit host, each node's files and SSH, options."""

from __future__ import annotations

import argparse
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.scheduler.batch import JobOptions
from gpufleet.scheduler.remote import ssh_runner
from gpufleet.scheduler.rule import SchedulerError
from gpufleet.validate.hostrun import HostRun, error_document
from gpufleet.validate.progress import Progress, document_status
from gpufleet.validate.slurm_jobs import NodeJob, NodeShell, SlurmJobs
from gpufleet.validate.suite import HOST_TIMEOUT_S, MAX_PARALLEL

SSH_TIMEOUT_S = 300


def submit_host(inventory: str, hosts: Sequence[InventoryHost]) -> InventoryHost:
    """Where sbatch and sacct run: the inventory host named by ``slurm_controller`` (looked
    for in the whole inventory, so ``--limit`` may leave it out), else the first node."""
    controller = str(hosts[0].data.get("slurm_controller") or "")
    if controller:
        try:
            everyone = load_hosts(inventory, [])
        except InventoryError:
            everyone = list(hosts)
        for host in [*hosts, *everyone]:
            if controller in (host.name, str(host.ssh_hostname)):
                return host
    return hosts[0]


def ssh_shell(ssh_config: Path) -> NodeShell:
    """Run a shell command on a run's host over the run's ssh_config (sudo when ``_sudo``)."""

    def shell(run: HostRun, command: str, stdin: bytes) -> tuple[int, bytes]:
        if run.host.data.get("_sudo"):
            command = f"sudo -n sh -c {shlex.quote(command)}"
        proc = subprocess.run(
            ["ssh", "-F", str(ssh_config), run.alias, command],
            input=stdin,
            capture_output=True,
            timeout=SSH_TIMEOUT_S,
            check=False,
        )
        return proc.returncode, proc.stdout if proc.returncode == 0 else proc.stderr

    return shell


def job_options(args: argparse.Namespace, host: InventoryHost) -> JobOptions:
    """Partition, reservation and features: the flags, else the inventory's slurm_* keys."""
    from gpufleet.spec import NodeSpec
    from validation.verdicts.expectations import spec_data

    spec = NodeSpec.from_host_data(spec_data(host.data))
    return JobOptions(
        partition=getattr(args, "partition", None) or spec.slurm_partition,
        reservation=getattr(args, "reservation", None) or spec.slurm_reservation,
        constraint=getattr(args, "constraint", None) or spec.slurm_constraint,
        time_limit_min=HOST_TIMEOUT_S[args.tier] // 60,
    )


def node_job(run: HostRun, args: argparse.Namespace, run_id: str) -> NodeJob:
    """Where one node's job keeps its files, and what it runs with."""
    from gpufleet.spec import NodeSpec
    from gpufleet.stages.python_env import WRAPPER  # the env's Python with its CUDA settings
    from gpufleet.stages.validation_payload import payload_paths
    from validation.verdicts.expectations import spec_data

    spec = NodeSpec.from_host_data(spec_data(run.host.data))
    return NodeJob(
        run=run,
        spool=f"{spec.slurm_spool_dir.rstrip('/')}/{run_id}",
        payload=args.payload_dir or payload_paths(spec.payload_dir)[1],
        python=args.python or WRAPPER,
    )


def dispatch(
    args: argparse.Namespace,
    pending: Sequence[HostRun],
    progress: Progress,
    *,
    run_id: str,
    started_at: str,
    workdir: Path,
    ssh_config: Path | None,
    selects: dict[str, str | None],
    checks: tuple[str, ...],
    log: Callable[[str], None],
) -> None:
    """Submit ``pending``'s jobs, follow them, gather their results into each run, a
    progress line per host as it ends; a run Slurm could not be asked about ends with an
    error document saying why."""
    for run in pending:
        progress.started(run.host.name)

    def finished(run: HostRun) -> None:
        progress.finished(run.host.name, *document_status(run.document))

    try:
        if not pending:
            return
        if ssh_config is None:
            raise InventoryError("Slurm jobs need hosts reached over SSH, not @local")
        hosts = [run.host for run in pending]
        where = submit_host(args.inventory, hosts)
        log(f"slurm: jobs go through {where.name} (sbatch, sacct, scancel)")
        jobs = SlurmJobs(
            ssh_runner(where, workdir),
            ssh_shell(ssh_config),
            job_options(args, hosts[0]),
            start_wait_s=getattr(args, "slurm_wait", None) or 300,
            log=log,
            parallel=args.parallel or MAX_PARALLEL,
        )
        jobs.run(
            [node_job(run, args, run_id) for run in pending],
            tier=args.tier,
            run_id=run_id,
            started_at=started_at,
            select=selects,
            checks=checks,
            asked=getattr(args, "select", None),
            finished=finished,
        )
    except (InventoryError, SchedulerError, OSError) as exc:
        for run in pending:
            if run.document is None:
                why = f"Slurm jobs could not be dispatched: {exc}"
                run.document = error_document(
                    run, tier=args.tier, run_id=run_id, started_at=started_at, why=why
                )
                finished(run)
