"""MirroredStrategy scaling on the ResNet-50 reference step, and every GPU busy while it runs.

Both arms read their batches through tf.data (the mirrored arm through
``distribute_datasets_from_function``, the input path real jobs use), run ``steps`` steps per
block without any host synchronisation (the mirrored arm keeps its per-replica losses on the
devices, no ``strategy.reduce``) and end each block with a device sync. With ``jit_compile``
the replica step is XLA-compiled, as Keras compiles it; TensorFlow then all-reduces through
CollectiveAllReduce instead of NcclAllReduce.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpufleet.floors.checks import utilization_balance
from validation.verdicts.harness import FAIL, INCONCLUSIVE, PASS, Verdict
from validation.workloads._refsteps import (
    RESNET50_CPU,
    RESNET50_GPU,
    build_model,
    device_sync,
    optimizer_for,
    replica_loss,
    synthetic_batch,
)
from validation.workloads.xla_cache import keyed

BUSY_PHASE = "mirrored_busy"


def _replica_step(
    tf: Any, model: Any, optimizer: Any, global_batch: int, scale: bool, jit_compile: bool
) -> Callable[[Any], Any]:
    """One replica's training step on one per-replica batch, loss averaged over the global one."""
    keras = tf.keras

    def replica(batch: Any) -> Any:
        inputs, labels = batch
        with tf.GradientTape() as tape:
            per_example = replica_loss(tf, keras, "resnet50", model, inputs, labels)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss) if scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    return tf.function(replica, jit_compile=jit_compile)


def _block(step: Callable[[], Any], sync: Callable[[], float], steps: int) -> Callable[[], float]:
    def run() -> float:
        for _ in range(steps):
            step()
        return sync()

    return run


def scaling_arms(
    tf: Any,
    strategy: Any,
    devices: Sequence[str],
    *,
    gpu: bool,
    precision: str,
    per_replica: int,
    steps: int,
    jit_compile: bool,
    seed: int,
) -> tuple[Callable[[], float], Callable[[], float]]:
    """(one device at ``per_replica`` images, all ``devices`` at ``per_replica`` each): blocks
    of ``steps`` ResNet-50 steps; the mirrored arm's model is built inside strategy.scope()."""
    keras = tf.keras
    arch = RESNET50_GPU if gpu else RESNET50_CPU
    with tf.device("/device:CPU:0"):  # the host holds the batch; tf.data copies it over
        batch = synthetic_batch(tf, "resnet50", arch, per_replica, seed)

    def dataset(_context: Any = None) -> Any:
        return tf.data.Dataset.from_tensors(batch).repeat().prefetch(2)

    scale = precision == "amp"
    with tf.device(devices[0]):
        single_model = build_model(keras, "resnet50", arch, precision, seed)
        single_opt = optimizer_for(keras, "resnet50", precision)
        single_opt.build(single_model.trainable_variables)
    source = dataset()
    if gpu:
        source = source.apply(tf.data.experimental.prefetch_to_device(devices[0]))
    single_it = iter(source)
    single_replica = _replica_step(tf, single_model, single_opt, per_replica, scale, jit_compile)

    @tf.function
    def single_step() -> Any:
        return single_replica(next(single_it))

    with strategy.scope():
        model = build_model(keras, "resnet50", arch, precision, seed)
        optimizer = optimizer_for(keras, "resnet50", precision)
        optimizer.build(model.trainable_variables)
    global_batch = per_replica * len(devices)
    mirrored_it = iter(strategy.distribute_datasets_from_function(dataset))
    mirrored_replica = _replica_step(tf, model, optimizer, global_batch, scale, jit_compile)

    @tf.function
    def mirrored_step() -> Any:
        losses = strategy.run(mirrored_replica, args=(next(mirrored_it),))
        return strategy.experimental_local_results(losses)  # stays on the devices

    # With XLA, each arm's trace (the compiled replica step's inside it) starts at a uid mark,
    # called eagerly from the block: stable persistent-cache keys
    # (validation.workloads.xla_cache.keyed).
    return (
        _block(
            keyed(single_step, jit_compile),
            device_sync(tf, single_model.trainable_variables),
            steps,
        ),
        _block(
            keyed(mirrored_step, jit_compile), device_sync(tf, model.trainable_variables), steps
        ),
    )


def per_gpu_means(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Mean utilization (%) per GPU from its independent NVML readings; GPUs without any are
    left out (the caller says inconclusive)."""
    return {gpu: round(statistics.fmean(v), 1) for gpu, v in samples.items() if v}


def busy_verdict(
    per_gpu_pct: Mapping[str, float],
    expected: Sequence[str],
    min_pct: float | None,
    max_spread_pct: float | None,
) -> Verdict:
    """Every GPU of the mirrored phase busy: each >= ``min_pct`` and max-min <= the spread
    (gpufleet.floors.checks.utilization_balance). A model built outside
    strategy.scope() leaves GPU 0 busy and the others near 0 %: that fails, naming them."""
    if min_pct is None or max_spread_pct is None:
        return Verdict(INCONCLUSIVE, "no utilization floor for this host")
    missing = sorted(set(expected) - set(per_gpu_pct))
    if missing:
        return Verdict(
            INCONCLUSIVE,
            f"no independent NVML readings of {', '.join(missing)} in the mirrored phase",
        )
    balance = utilization_balance(per_gpu_pct, min_pct, max_spread_pct)
    shown = ", ".join(f"{g} {v:g} %" for g, v in sorted(per_gpu_pct.items()))
    return Verdict(PASS if balance.passed else FAIL, f"{balance.detail} ({shown})")
