"""MirroredStrategy: throughput on all GPUs vs one at the same per-replica batch; same losses.

Run: ``python -m validation.workloads.mirrored [--quick] [--json PATH]``

Scaling efficiency = (throughput_N / throughput_1) / N; with the same per-replica batch b that
is time(1 device, batch b) / time(N devices, batch N*b) per step. Correctness: from the same
initial weights, the mirrored run's losses match a single-device run on the same global batch.
Model and optimizer are built inside strategy.scope(), as TensorFlow requires. Only one
MirroredStrategy per process (a second one aborts collectives; DESIGN.md). Without a GPU it
runs on two logical CPU devices.
"""

from __future__ import annotations

import math
from typing import Any

from gpufleet.compat import zip_strict
from validation.harness import FAIL, PASS, Verdict
from validation.workloads._common import Run, main
from validation.workloads._training import (
    mlp,
    relative_difference,
    repeat_steps,
    synthetic_data,
    train_step,
)

QUICK: dict[str, Any] = {
    "per_replica_batch": 16,
    "inputs": 64,
    "width": 128,
    "depth": 2,
    "steps": 4,
    "check_steps": 4,
    "pairs": 8,
}
QUICK_GPU: dict[str, Any] = {
    "per_replica_batch": 128,
    "inputs": 1024,
    "width": 2048,
    "depth": 3,
    "steps": 10,
    "check_steps": 4,
    "pairs": 8,
}
FULL: dict[str, Any] = {
    "per_replica_batch": 256,
    "inputs": 1024,
    "width": 4096,
    "depth": 4,
    "steps": 20,
    "check_steps": 5,
    "pairs": 12,
}
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
        return strategy.reduce("SUM", per_replica, axis=None)

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

    # Single-device reference on the global batch, and the 1-device throughput baseline.
    with tf.device(devices[0]):
        reference = train_step(tf, build(), keras.optimizers.SGD(LEARNING_RATE), jit_compile=False)
        x_all, y_all = tf.constant(x_np), tf.constant(y_np)
        x_one, y_one = tf.constant(x_np[:per_replica]), tf.constant(y_np[:per_replica])
        single = train_step(tf, build(), keras.optimizers.SGD(LEARNING_RATE), jit_compile=False)

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
    for index in range(cfg["check_steps"]):
        losses["single"].append(float(reference(x_all, y_all)))
        losses["mirrored"].append(float(step(x_dist, y_dist)))
        run.step(
            "check",
            f"step {index} single={losses['single'][-1]:.6f} mirrored={losses['mirrored'][-1]:.6f}",
            ",".join(devices),
        )
    run.measurements["losses"] = losses
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

    threshold = run.threshold("mirrored_scaling_efficiency_min")
    skip = run.speed_not_applicable
    if skip is None and replicas < 2:
        skip = f"scaling needs at least 2 GPUs; this host has {replicas}"
    run.step("ab", f"1 device (batch {per_replica}) vs {replicas} (batch {global_batch})")
    # Both arms are warmed up by compare_ab until their call times settle.
    result = run.ab(
        "scaling_efficiency",
        "scaling_efficiency",
        run.timed("single", repeat_steps(single, (x_one, y_one), cfg["steps"])),
        run.timed("mirrored", repeat_steps(step, (x_dist, y_dist), cfg["steps"])),
        threshold=threshold,
        pairs=cfg["pairs"],
        device=",".join(devices),
        not_applicable=skip,
    )
    if result is not None:
        run.measurements["ab"] = result.to_dict()


if __name__ == "__main__":
    raise SystemExit(main("mirrored", body, description=__doc__.splitlines()[0], logical_cpus=2))
