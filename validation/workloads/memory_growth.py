"""Memory growth: with the environment's defaults a small model leaves most GPU memory free.

Run: ``python -m validation.workloads.memory_growth [--quick] [--json PATH]``

TensorFlow grabs nearly all GPU memory at start unless memory growth is on; the provisioned
environment sets TF_FORCE_GPU_ALLOW_GROWTH=true (DESIGN.md, decision 1) so several processes
can share a GPU. This workload changes no TensorFlow setting: it trains a small model, reads
through NVML how much GPU memory this process holds, then starts a second process that trains
the same model on the same GPU and then allocates a large share of the GPU's memory
(memory_growth_second_share, 40 %) while the first still holds its own: real sharing. Both
must succeed; without memory growth the first process holds nearly everything and the second
process's allocation fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from validation.verdicts.harness import FAIL, INCONCLUSIVE, PASS, Verdict
from validation.workloads._common import NO_GPU, Run, main, not_applicable
from validation.workloads._devices import nvml_index
from validation.workloads._training import mlp, synthetic_data, train_step

CONFIG = {"batch": 64, "inputs": 256, "width": 512, "depth": 2, "steps": 5}
CHILD_TIMEOUT_S = 120


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--second-process", action="store_true", help=argparse.SUPPRESS
    )  # set on the child this workload starts itself
    parser.add_argument("--share", type=float, default=0.0, help=argparse.SUPPRESS)


def share_mib(total_mib: float, share: float) -> int:
    """How much the second process allocates: ``share`` of the GPU's memory, in MiB."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"memory_growth_second_share must be between 0 and 1; got {share}")
    return int(total_mib * share)


def _allocate_share(run: Run) -> Verdict:
    """In the second process: hold ``--share`` of the GPU's memory at once, as a real job would."""
    if not run.has_gpu:
        return not_applicable(NO_GPU)
    total = float(run.devices[0].get("memory_mib") or 0.0)
    if total <= 0:
        return Verdict(INCONCLUSIVE, "the GPU's memory size is not known")
    mib = share_mib(total, run.args.share)
    tf = run.tf
    try:
        with tf.device(run.compute_devices[0]):
            block = tf.ones([mib, 2**20], tf.uint8)
            float(tf.reduce_sum(tf.cast(block[-1, :8], tf.float32)))  # materialised on the GPU
        del block
    except tf.errors.ResourceExhaustedError as exc:
        first = str(exc).splitlines()[0][:200]
        return Verdict(FAIL, f"could not allocate {mib} MiB ({run.args.share:.0%}): {first}")
    return Verdict(PASS, f"allocated {mib} MiB ({run.args.share:.0%} of {total:.0f} MiB)")


def _train(run: Run) -> list[float]:
    tf, keras = run.tf, run.tf.keras
    device = run.compute_devices[0]
    x_np, y_np = synthetic_data(CONFIG["batch"], CONFIG["inputs"], 8, run.args.seed)
    with tf.device(device):
        model = mlp(
            keras,
            inputs=CONFIG["inputs"],
            width=CONFIG["width"],
            depth=CONFIG["depth"],
            outputs=8,
            seed=run.args.seed,
        )
        step = train_step(tf, model, keras.optimizers.SGD(0.01), jit_compile=False)
        x, y = tf.constant(x_np), tf.constant(y_np)
        with run.phase("train"):
            losses = [float(step(x, y)) for _ in range(CONFIG["steps"])]
    run.step("train", f"{CONFIG['steps']} steps, last loss {losses[-1]:.6f}", device)
    return losses


def _second_process(run: Run) -> dict[str, Any]:
    """Run this workload again as a child on the same device; its JSON document."""
    root = Path(__file__).resolve().parents[2]  # the folder holding the validation package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "validation.workloads.memory_growth", "--second-process"]
    command += ["--share", str(run.threshold("memory_growth_second_share"))]
    if run.quick:
        command.append("--quick")
    run.step("second_process", " ".join(command))
    child = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S, check=False
    )
    try:
        document = json.loads(child.stdout)
    except json.JSONDecodeError:
        tail = (child.stderr or "").strip().splitlines()[-3:]
        return {
            "exit_status": child.returncode,
            "verdict": {
                "status": FAIL,
                "reason": f"no JSON from the second process: {' | '.join(tail)}",
            },
        }
    document["exit_status"] = child.returncode
    return document


def _memory_verdict(run: Run) -> Verdict:
    """Whether this process left at least the threshold's fraction of GPU 0's memory free."""
    free_min = run.threshold("memory_growth_min_free_fraction")
    sampler = run.sampler
    if not run.has_gpu:
        return not_applicable(NO_GPU)
    if sampler is None or not sampler.available:
        why = sampler.unavailable_reason if sampler else "sampler not started"
        return Verdict(INCONCLUSIVE, f"cannot read GPU memory without NVML: {why}")
    key = f"gpu{nvml_index(0)}"
    held = sampler.process_memory_mib().get(key, 0.0)
    source = "NVML per-process"
    if held <= 0:
        # In a container NVML may not list our PID: fall back to the device's growth.
        reading = {s.device: s for s in sampler.read_once()}[key]
        held = max(0.0, reading.memory_used_mib - sampler.baseline_used_mib.get(key, 0.0))
        source = "NVML device used minus used at start"
    total = next(d.memory_total_mib for d in sampler.devices if f"gpu{d.index}" == key)
    free_fraction = 1.0 - held / total
    run.metrics.update(
        process_memory_mib=held,
        device_memory_mib=total,
        free_fraction=free_fraction,
        memory_source=source,
    )
    return Verdict(
        PASS if free_fraction >= free_min else FAIL,
        f"this process holds {held:.0f} of {total:.0f} MiB on {key} ({source}): "
        f"{free_fraction:.1%} left free (needs >= {free_min:.0%}); "
        f"TF_FORCE_GPU_ALLOW_GROWTH={os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH')}",
    )


def body(run: Run) -> None:
    run.config.update(
        CONFIG,
        device=run.compute_devices[0],
        second_process=run.args.second_process,
        TF_FORCE_GPU_ALLOW_GROWTH=os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH"),
    )
    losses = _train(run)
    run.measurements["losses"] = losses
    finite = all(map(math.isfinite, losses))
    run.add_check(
        "losses_finite",
        "correctness",
        Verdict(
            PASS if finite else FAIL,
            f"{len(losses)} training losses finite" if finite else f"non-finite loss in {losses}",
        ),
    )

    run.add_check("memory_left_free", "memory", _memory_verdict(run))
    if run.args.second_process:
        run.add_check("large_share_allocated", "memory", _allocate_share(run))
        return

    child = _second_process(run)
    run.measurements["second_process"] = {
        k: child.get(k) for k in ("exit_status", "verdict", "metrics", "checks")
    }
    ok = child.get("exit_status") == 0 and child["verdict"]["status"] in (PASS, "not_applicable")
    run.add_check(
        "second_process_trains",
        "correctness",
        Verdict(
            PASS if ok else FAIL,
            f"a second process trained on {run.compute_devices[0]} (on a GPU also allocating "
            f"{run.threshold('memory_growth_second_share'):.0%} of it) while this one held its "
            "memory: "
            f"exit {child.get('exit_status')}, verdict {child['verdict']['status']} "
            f"({child['verdict']['reason']})",
        ),
    )


if __name__ == "__main__":
    raise SystemExit(
        main("memory_growth", body, description=__doc__.splitlines()[0], add_arguments=_arguments)
    )
