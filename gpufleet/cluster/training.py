"""The MultiWorkerMirroredStrategy job across the group, and its single-host reference run.

One worker per host (``validation.cluster.worker``), TF_CONFIG from the inventory's order.
Correctness: every worker ends with the same weights (bit for bit: the all-reduce gives every
worker the same sums), and the same loss and weights as one host training on the same global
batches, within float round-off. When a worker fails, the job is stopped on every host at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.cluster import srun
from gpufleet.cluster.config import PORTS, ClusterHost, tf_config
from gpufleet.cluster.launcher import Launcher, Remote

PER_WORKER_BATCH = 32
DEFAULT_STEPS = 300
# Float round-off between one host's sums and the ring's (measured: 6e-8 after 50 steps).
LOSS_RTOL = 1e-4
WEIGHTS_ATOL = 1e-4
JOB_TIMEOUT_S = 600
FAILURE_GRACE_S = 1.0
WORKER_LABEL = "tf-worker"
# The step every worker trains: a name in validation.cluster.steps.STEPS (a reference step
# from the workloads, e.g. ResNet-50, can be registered there and named here).
STEP = "dense_regression"


@dataclass
class JobOutcome:
    """What one job run gave: per-host documents, or the failure and the host it names."""

    documents: dict[str, dict[str, Any]]
    failure: str = ""
    failed_host: str | None = None
    wall_s: float = 0.0


def worker_argv(host: ClusterHost, steps: int, global_batch: int, step: str) -> list[str]:
    return [
        host.python,
        "-m",
        "validation.cluster.worker",
        "--step",
        step,
        "--steps",
        str(steps),
        "--global-batch",
        str(global_batch),
    ]


def worker_env(host: ClusterHost, config: str | None) -> dict[str, str]:
    env = {"PYTHONPATH": host.payload_dir, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if host.gpu_less:
        env["CUDA_VISIBLE_DEVICES"] = "-1"  # as TensorFlow's multi-worker tutorial does on CPU
    if config is not None:
        env["TF_CONFIG"] = config
    return env


def _document(out: str) -> dict[str, Any] | None:
    lines = [line for line in out.strip().splitlines() if line.startswith("{")]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and "weights_sha256" in doc else None


def _exit_words(status: int | None) -> str:
    if status is None:
        return "did not finish"
    if status == 255:
        return "lost its ssh session (exit 255: ssh failed, or the session was killed)"
    if status > 128:
        return f"exited {status} (killed by signal {status - 128})"
    return f"exited {status}"


def run_job(
    launcher: Launcher,
    hosts: Sequence[ClusterHost],
    *,
    steps: int,
    step: str,
    reference: bool = False,
    timeout: float = JOB_TIMEOUT_S,
) -> JobOutcome:
    """Run the job on ``hosts`` (``reference``: one process, no TF_CONFIG, on hosts[0] with
    the group's global batch). The first worker to fail names its host; the others are
    stopped then and there."""
    workers = 1 if reference else len(hosts)
    global_batch = PER_WORKER_BATCH * (len(hosts) if reference else workers)
    chosen = hosts[:1] if reference else list(hosts)
    started = time.monotonic()
    remotes: list[Remote] = []
    for index, host in enumerate(chosen):
        config = None if reference else tf_config(chosen, index)
        label = f"{WORKER_LABEL}-ref" if reference else WORKER_LABEL
        argv = worker_argv(host, steps, global_batch, step)
        if host.slurm:
            argv = srun.srun_argv(host, launcher.run_id, argv)
        remotes.append(launcher.start(host, label, argv, worker_env(host, config)))
    outcome = JobOutcome(documents={})
    pending = list(remotes)
    failed: list[tuple[Remote, int | None, str]] = []
    while pending and not failed:
        if time.monotonic() - started > timeout:
            outcome.failure = f"the job did not finish within {timeout:.0f} s"
            break
        for remote in [r for r in pending if r.finished()]:
            pending.remove(remote)
            status, out, err = remote.wait(10)
            doc = _document(out) if status == 0 else None
            if doc is None:
                failed.append((remote, status, err))
            else:
                outcome.documents[remote.host.name] = doc
        time.sleep(0.2)
    if failed:
        # Its peers fail soon after a lost worker: look once more, then name the worker that
        # was killed by a signal, else the first seen to fail.
        time.sleep(FAILURE_GRACE_S)
        for remote in [r for r in pending if r.finished()]:
            pending.remove(remote)
            status, _out, err = remote.wait(10)
            failed.append((remote, status, err))
        signalled = [f for f in failed if f[1] is not None and f[1] > 128]
        remote, status, err = signalled[0] if len(signalled) == 1 else failed[0]
        tail = " | ".join(err.strip().splitlines()[-3:])[:400]
        outcome.failure = f"the worker on {remote.host.name} {_exit_words(status)}" + (
            f": {tail}" if tail else ""
        )
        outcome.failed_host = remote.host.name
    if outcome.failure:
        for remote in pending:  # stop the rest now: they would wait on the lost peer
            launcher.stop(remote.host, remote.label)
    outcome.wall_s = time.monotonic() - started
    return outcome


def judge(group: JobOutcome, single: JobOutcome, hosts: Sequence[ClusterHost]) -> dict[str, Any]:
    """The training section of the results: correctness and speed verdicts."""
    section: dict[str, Any] = {
        "workers": [
            {"host": name, **{k: v for k, v in doc.items() if k != "weights"}}
            for name, doc in group.documents.items()
        ],
        "reference": {
            k: v for k, v in next(iter(single.documents.values()), {}).items() if k != "weights"
        },
        "ports": list(PORTS),
        "launcher": "srun" if any(h.slurm for h in hosts) else "ssh",
        "wall_s": round(group.wall_s, 2),
    }
    if group.failure:
        return {**section, "status": "fail", "reason": group.failure, "named": group.failed_host}
    if single.failure:
        return {**section, "status": "error", "reason": f"single-host reference: {single.failure}"}
    docs = group.documents
    digests: dict[str, list[str]] = {}
    for name, doc in docs.items():
        digests.setdefault(doc["weights_sha256"], []).append(name)
    ref = next(iter(single.documents.values()))
    first = docs[hosts[0].name]
    max_diff = max(abs(a - b) for a, b in zip(first["weights"], ref["weights"], strict=True))
    loss_rel = abs(first["final_loss"] - ref["final_loss"]) / max(abs(ref["final_loss"]), 1e-12)
    section.update(
        identical_weights=len(digests) == 1,
        max_weight_diff_vs_single=max_diff,
        loss_rel_diff_vs_single=loss_rel,
        loss_rtol=LOSS_RTOL,
        weights_atol=WEIGHTS_ATOL,
    )
    problems = []
    named = None
    if len(digests) > 1:
        majority = max(digests.values(), key=len)
        odd = [n for names in digests.values() if names is not majority for n in names]
        named = odd[0] if len(odd) == 1 and len(majority) > 1 else None
        problems.append(f"workers ended with different weights: {', '.join(sorted(odd))} differ")
    if max_diff > WEIGHTS_ATOL:
        problems.append(
            f"weights differ from the single-host run by {max_diff:.3g} > {WEIGHTS_ATOL}"
        )
    if loss_rel > LOSS_RTOL:
        problems.append(f"final loss differs from the single-host run by {loss_rel:.3g} (relative)")
    section["status"] = "fail" if problems else "pass"
    section["reason"] = "; ".join(problems)
    section["named"] = named
    section["speed"] = speed_verdict(group, single, hosts)
    return section


def speed_verdict(group: JobOutcome, single: JobOutcome, hosts: Sequence[ClusterHost]) -> dict:
    """Cross-node scaling is judged on GPUs only: a CPU's speed says nothing about the fabric."""
    if any(h.gpu_less for h in hosts):
        return {"status": "not_applicable", "reason": "no GPU"}
    per_worker = [d["examples_per_s"] for d in group.documents.values()]
    ref = next(iter(single.documents.values()))["examples_per_s"]
    efficiency = min(per_worker) / (len(hosts) * ref) if ref else 0.0
    return {
        "status": "inconclusive",
        "reason": "no published cross-node floor for the small step; figure recorded",
        "scaling_efficiency": efficiency,
    }
