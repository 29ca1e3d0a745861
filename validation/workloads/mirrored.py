"""MirroredStrategy: throughput on all GPUs vs one at the same per-replica batch; same losses.

Run: ``python -m validation.workloads.mirrored [--quick] [--json PATH]``

Speed on the ResNet-50 reference step at AMP (validation.workloads._scaling): scaling
efficiency = (throughput_N / throughput_1) / N; with the same per-replica batch b that is
time(1 device, batch b) / time(N devices, batch N*b) per block, judged against
run.floor("mirrored.scaling_efficiency") (DLE's weak scaling x a margin, per interconnect);
the full tier repeats it with the replica step XLA-compiled. While the mirrored step runs
alone for a few seconds, every GPU must be busy (NVML, ``gpu_utilization_pct`` per GPU against
the utilization and spread floors): a model built outside strategy.scope() fails it.
Correctness on a small MLP: from the same initial weights, the mirrored run's losses match a
single-device run on the same global batch. Only one MirroredStrategy per process (a second
one aborts collectives; DESIGN.md). Without a GPU it runs on two logical CPU devices.
"""

from __future__ import annotations

import math
import time
from typing import Any

from gpufleet.compat import zip_strict
from validation.verdicts.harness import FAIL, INCONCLUSIVE, PASS, Verdict
from validation.workloads._batch import batch_for, figure_mismatch
from validation.workloads._common import NO_GPU, Run, main, not_applicable
from validation.workloads._devices import nvml_index
from validation.workloads._scaling import BUSY_PHASE, busy_verdict, per_gpu_means, scaling_arms
from validation.workloads._throughput import speed_skip
from validation.workloads._training import (
    mlp,
    relative_difference,
    synthetic_data,
    train_step,
)

# The MLP (correctness) at one small size everywhere; the reference step's sizes per tier.
QUICK: dict[str, Any] = {"per_replica_batch": 16, "inputs": 64, "width": 128, "depth": 2}
QUICK |= {"check_steps": 4, "ref_batch": 4, "steps": 2, "pairs": 6, "busy_s": 0.0}
QUICK |= {"jit_variant": False}  # XLA cannot place per-replica clusters on logical CPUs
# Blocks of 3-5 steps (0.3-1.2 s on an A100) and MIN_PAIRS pairs: docs/explanation/time-budget.md.
QUICK_GPU: dict[str, Any] = {**QUICK, "ref_batch": None, "steps": 3, "busy_s": 3.0}
FULL: dict[str, Any] = {**QUICK_GPU, "steps": 5, "pairs": 6, "busy_s": 4.0, "jit_variant": True}
PRECISION = "amp"  # DLE's weak-scaling rows; the faster step leaves the all-reduce more exposed
LEARNING_RATE = 0.01


def _mirrored_step(tf: Any, strategy: Any, model: Any, optimizer: Any, global_batch: int) -> Any:
    """A distributed SGD step: per-replica mean-squared error scaled to the global batch."""

    def replica_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=-1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    @tf.function
    def step(x: Any, y: Any) -> Any:
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.reduce("SUM", per_replica, axis=None)  # correctness only: not timed

    return step


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    devices = run.compute_devices
    replicas = len(devices)
    per_replica = cfg["per_replica_batch"]
    global_batch = per_replica * replicas
    cross_device = tf.distribute.NcclAllReduce() if run.has_gpu else None
    run.config.update(
        devices=devices,
        replicas=replicas,
        global_batch=global_batch,
        cross_device_ops="NcclAllReduce" if run.has_gpu else "default (CPU)",
        model="MLP (Dense + ReLU)",
    )
    x_np, y_np = synthetic_data(global_batch, cfg["inputs"], 16, run.args.seed)

    def build() -> Any:
        return mlp(
            keras,
            inputs=cfg["inputs"],
            width=cfg["width"],
            depth=cfg["depth"],
            outputs=16,
            seed=run.args.seed,
        )

    # Single-device reference on the global batch.
    with tf.device(devices[0]):
        reference = train_step(tf, build(), keras.optimizers.SGD(LEARNING_RATE), jit_compile=False)
        x_all, y_all = tf.constant(x_np), tf.constant(y_np)

    strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=cross_device)
    run.step("strategy", f"MirroredStrategy over {replicas} device(s)")
    with strategy.scope():
        model = build()
        optimizer = keras.optimizers.SGD(LEARNING_RATE)
        optimizer.build(model.trainable_variables)
    step = _mirrored_step(tf, strategy, model, optimizer, global_batch)

    def shard(array: Any) -> Any:
        def value(context: Any) -> Any:
            start = context.replica_id_in_sync_group * per_replica
            return tf.constant(array[start : start + per_replica])

        return strategy.experimental_distribute_values_from_function(value)

    x_dist, y_dist = shard(x_np), shard(y_np)
    losses: dict[str, list[float]] = {"single": [], "mirrored": []}
    for index in range(1 if run.warm else cfg["check_steps"]):  # a cache warm-up: each once
        losses["single"].append(float(reference(x_all, y_all)))
        losses["mirrored"].append(float(step(x_dist, y_dist)))
        run.step(
            "check",
            f"step {index} single={losses['single'][-1]:.6f} mirrored={losses['mirrored'][-1]:.6f}",
            ",".join(devices),
        )
    run.measurements["losses"] = losses
    if not run.warm:
        _judge_losses(run, cfg, losses, replicas, global_batch)
    if replicas < 2:
        single = f"scaling needs at least 2 GPUs; this host has {replicas}"
        run.add_check("scaling_efficiency", "speed", not_applicable(single))
        run.add_check("every_gpu_busy", "utilization", not_applicable(single))
        return
    threshold, skip = speed_skip(run, "mirrored.scaling_efficiency")
    # One batch for the plain and the XLA variant: the plain one's must fit (review 2 N7), and
    # DLE's weak-scaling floor holds only at its figure's batch.
    ref_batch = cfg["ref_batch"] or batch_for(run, "resnet50", PRECISION, xla=False)
    if skip is None and run.has_gpu:
        skip = figure_mismatch(run.gpu_model, "resnet50", PRECISION, ref_batch)
    run.config.update(speed_model=f"ResNet-50 v1.5 {PRECISION}, {ref_batch} per replica")
    variants = [("", False)] + ([("_xla", True)] if cfg["jit_variant"] else [])
    mirrored_block = None
    for suffix, jit in variants:
        single_block, mirrored_block = scaling_arms(
            tf,
            strategy,
            devices,
            gpu=run.has_gpu,
            precision=PRECISION,
            per_replica=ref_batch,
            steps=1 if run.warm else cfg["steps"],
            jit_compile=jit,
            seed=run.args.seed,
        )
        run.step("ab", f"1 device vs {replicas}, {ref_batch} per replica, xla={jit}")
        # Both arms are warmed up by compare_ab until their call times settle.
        result = run.ab(
            f"scaling_efficiency{suffix}",
            "scaling_efficiency" + (".xla" if jit else ""),
            run.timed(f"single{suffix}", single_block),
            run.timed(f"mirrored{suffix}", mirrored_block),
            threshold=threshold,
            pairs=cfg["pairs"],
            device=",".join(devices),
            not_applicable=skip,
        )
        if result is not None:
            run.measurements[f"ab{suffix}"] = result.to_dict()
    if not run.warm:  # a cache warm-up: every step compiled by now
        every_gpu_busy(run, mirrored_block, cfg["busy_s"])


def _judge_losses(
    run: Run, cfg: dict[str, Any], losses: dict[str, list[float]], replicas: int, global_batch: int
) -> None:
    """From the same initial weights, the mirrored losses match one device's on the global batch."""
    rtol = run.threshold("mirrored_loss_rtol")
    worst = max(
        relative_difference(a, b) for a, b in zip_strict(losses["mirrored"], losses["single"])
    )
    finite = all(map(math.isfinite, losses["single"] + losses["mirrored"]))
    run.metrics["loss_max_relative_difference"] = worst
    run.add_check(
        "losses_match_single_device",
        "correctness",
        Verdict(
            PASS if finite and worst <= rtol else FAIL,
            f"mirrored ({replicas} replicas) vs one device on the global batch {global_batch}: "
            f"max relative loss difference {worst:.2e} over {cfg['check_steps']} steps "
            f"(tolerance {rtol:.0e}){'' if finite else '; non-finite loss'}",
        ),
    )


def every_gpu_busy(run: Run, block: Any, seconds: float) -> None:
    """Run the mirrored step alone for ``seconds`` and judge every GPU's NVML utilization."""
    if not run.has_gpu:
        run.add_check("every_gpu_busy", "utilization", not_applicable(NO_GPU))
        return
    util = run.floor("mirrored.gpu_utilization_pct")
    spread = run.floor("mirrored.gpu_utilization_spread_pct")
    sampler = run.sampler
    if sampler is None or not sampler.available:
        why = sampler.unavailable_reason if sampler else "sampler not started"
        run.add_check("every_gpu_busy", "utilization", Verdict(INCONCLUSIVE, f"no NVML: {why}"))
        return
    with run.phase(BUSY_PHASE):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            block()
    keys = [f"gpu{nvml_index(i)}" for i in range(len(run.gpus))]
    samples = {k: [s.utilization_pct for s in sampler.thinned(BUSY_PHASE, k)] for k in keys}
    run.measurements["busy_samples"] = samples
    per_gpu = per_gpu_means(samples)
    run.metrics["gpu_utilization_pct"] = per_gpu
    verdict = busy_verdict(
        per_gpu,
        keys,
        util.value if util is not None else None,
        spread.value if spread is not None else None,
    )
    run.add_check("every_gpu_busy", "utilization", verdict)


if __name__ == "__main__":
    raise SystemExit(main("mirrored", body, description=__doc__.splitlines()[0], logical_cpus=2))
