"""Workers of the cluster tier as Slurm jobs: the srun line around a worker, and their clean-up.

On hosts whose inventory says ``scheduler: slurm``, each worker (and the single-host reference
run) runs as a one-task job on its own node, so Slurm accounts for it, keeps other jobs off the
node while it measures (``--exclusive``), gives it the node's GPUs, and never queues it behind
users' jobs: ``--immediate`` fails at once when the node is busy or drained.

Example:
    >>> srun_argv(host, "20261201T120000Z-abc123", ["/opt/env/bin/python", "-m", "w"])[:3]
    ['srun', '--job-name=gpufleet-cluster-20261201T120000Z-abc123', '--nodelist=gpu-a']
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from gpufleet.cluster.config import WORKER_PS_PATTERN, ClusterHost, plain_run_id

JOB_PREFIX = "gpufleet-cluster-"
# Seconds srun may wait for its node before giving up: a node that is busy (a user's job),
# drained or down is a failed run, never a validation that sits in the queue.
IMMEDIATE_S = 30


def job_name(run_id: str) -> str:
    """The name every job of one run carries (what the clean-up cancels by)."""
    return f"{JOB_PREFIX}{plain_run_id(run_id)}"


def srun_argv(host: ClusterHost, run_id: str, argv: Sequence[str]) -> list[str]:
    """``argv`` as a one-task job on ``host``'s own Slurm node (named as in the inventory,
    gpufleet.scheduler.validate_hook.node_name). The environment (TF_CONFIG) goes with it."""
    args = [
        "srun",
        f"--job-name={job_name(run_id)}",
        f"--nodelist={host.name}",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        f"--immediate={IMMEDIATE_S}",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--quiet",
    ]
    if host.slurm_partition:
        args.append(f"--partition={host.slurm_partition}")
    if not host.gpu_less and host.gpu_count:
        args.append(f"--gres=gpu:{int(host.gpu_count)}")
    return [*args, *argv]


def cancel_script(run_id: str) -> str:
    """A shell line that cancels the run's jobs on this host's cluster and waits (10 s at
    most) until no worker of the run is left on the host: a job whose srun was killed can
    outlive it for a moment under slurmstepd."""
    name = shlex.quote(job_name(run_id))
    worker = f"ps -eo args= | grep -q '{WORKER_PS_PATTERN}'"
    return (
        f"scancel --quiet --name={name} 2>/dev/null; "
        f"i=0; while {worker} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done"
    )
