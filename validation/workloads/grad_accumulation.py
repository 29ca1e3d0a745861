"""Gradient accumulation: 4 accumulated micro-batches update weights like one step on the 4x batch.

Run: ``python -m validation.workloads.grad_accumulation [--quick] [--json PATH]``

The seed guide's answer to "the batch does not fit": accumulate gradients over micro-batches
and apply them once. Two copies of one model start from the same weights; one takes an SGD
(momentum) step on the whole batch, the other averages the gradients of 4 quarter batches and
applies them once. After several updates their weights must agree within tolerance. On a GPU
it also proves what accumulation is for: on an activation-heavy MLP the accumulated step's
extra peak memory (tf.config.experimental.get_memory_info) is a fraction of the whole batch's.
The micro-batches run one after another (``after``: each one's input waits for the previous
one's gradients), as a GPU would otherwise run their forwards side by side.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpufleet.compat import zip_strict
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.workloads._common import NO_GPU, Run, main, not_applicable
from validation.workloads._training import mlp, mse, synthetic_data

QUICK: dict[str, Any] = {
    "micro_batch": 16,
    "micro_batches": 4,
    "inputs": 32,
    "width": 64,
    "depth": 2,
    "updates": 3,
}
FULL: dict[str, Any] = {
    "micro_batch": 256,
    "micro_batches": 4,
    "inputs": 512,
    "width": 2048,
    "depth": 3,
    "updates": 5,
}


def _steps(tf: Any, model: Any, optimizer: Any, micro_batches: int) -> tuple[Any, Any]:
    """(whole-batch step, accumulated step) for one model/optimizer pair each."""
    variables = model.trainable_variables

    @tf.function
    def whole(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = mse(tf, model(x, training=True), y)
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    @tf.function
    def accumulated(x: Any, y: Any) -> Any:
        xs, ys = tf.split(x, micro_batches), tf.split(y, micro_batches)
        total = [tf.zeros_like(v) for v in variables]
        losses: list[Any] = []
        grads: list[Any] = []
        for x_part, y_part in zip_strict(xs, ys):
            x_part = after(tf, grads, x_part)
            with tf.GradientTape() as tape:
                loss = mse(tf, model(x_part, training=True), y_part)
            grads = tape.gradient(loss, variables)
            total = [t + g for t, g in zip_strict(total, grads)]
            losses.append(loss)
        # Mean of equal-sized micro-batch means = mean over the whole batch.
        optimizer.apply([t / micro_batches for t in total], variables)
        return tf.add_n(losses) / micro_batches

    return whole, accumulated


def after(tf: Any, grads: list[Any], tensor: Any) -> Any:
    """``tensor``, readable only once ``grads`` (the previous micro-batch's) are computed.

    Review 2 N6: a GPU's executor runs ready kernels breadth-first (GPU kernels are
    "inexpensive", so they go on its FIFO queue), and nothing in the unrolled loop orders one
    micro-batch's forward after another's backward: all forwards' activations would be live
    at once and the peak would be the whole batch's. A control edge from micro-batch i's
    gradients to micro-batch i+1's input makes the order depth-first on every device, so at
    most one micro-batch's activations are held.
    """
    if not grads:
        return tensor
    with tf.control_dependencies([g for g in grads if g is not None]):
        return tf.identity(tensor)


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK, FULL)
    device = run.compute_devices[0]
    batch = cfg["micro_batch"] * cfg["micro_batches"]
    run.config.update(
        batch=batch,
        device=device,
        optimizer="SGD(learning_rate=0.05, momentum=0.9)",
        model="MLP (Dense + ReLU)",
    )
    x_np, y_np = synthetic_data(batch, cfg["inputs"], 8, run.args.seed)
    with tf.device(device):
        x, y = tf.constant(x_np), tf.constant(y_np)
        # Model 0 takes whole-batch steps, model 1 accumulated ones, from the same weights.
        models, steps = [], []
        for index in range(2):
            model = mlp(
                keras,
                inputs=cfg["inputs"],
                width=cfg["width"],
                depth=cfg["depth"],
                outputs=8,
                seed=run.args.seed,
            )
            optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
            optimizer.build(model.trainable_variables)
            models.append(model)
            steps.append(_steps(tf, model, optimizer, cfg["micro_batches"])[index])
        whole, accumulated = steps
        losses: dict[str, list[float]] = {"whole": [], "accumulated": []}
        for update in range(cfg["updates"]):
            losses["whole"].append(float(whole(x, y)))
            losses["accumulated"].append(float(accumulated(x, y)))
            run.step(
                "update",
                f"{update} whole={losses['whole'][-1]:.6f} "
                f"accumulated={losses['accumulated'][-1]:.6f}",
                device,
            )
    run.measurements["losses"] = losses
    rtol = run.threshold("grad_accumulation_rtol")
    atol = run.threshold("grad_accumulation_atol")
    worst_excess = 0.0
    worst_abs = 0.0
    moved = 0.0
    for a, b, start in zip_strict(
        models[0].get_weights(),
        models[1].get_weights(),
        _initial_weights(keras, cfg, run.args.seed),
    ):
        difference = np.abs(a - b)
        worst_abs = max(worst_abs, float(difference.max()))
        worst_excess = max(worst_excess, float((difference - (atol + rtol * np.abs(a))).max()))
        moved = max(moved, float(np.abs(a - start).max()))
    run.metrics.update(max_abs_weight_difference=worst_abs, max_weight_change=moved)
    finite = all(map(math.isfinite, losses["whole"] + losses["accumulated"]))
    # The check must be able to fail: weights that never moved would agree trivially.
    ok = finite and worst_excess <= 0.0 and moved > 10 * atol
    run.add_check(
        "weights_match_large_batch",
        "correctness",
        Verdict(
            PASS if ok else FAIL,
            f"after {cfg['updates']} updates, {cfg['micro_batches']} accumulated micro-batches of "
            f"{cfg['micro_batch']} vs one batch of {batch}: max weight difference {worst_abs:.2e} "
            f"(rtol {rtol:.0e}, atol {atol:.0e}); weights moved up to {moved:.2e}"
            f"{'' if finite else '; non-finite loss'}",
        ),
    )
    run.add_check("peak_memory_lower", "memory", _peak_memory(run, cfg["micro_batches"]))


# Activation-heavy (wide batch, narrow layers): the memory accumulation saves is activations.
MEMORY: dict[str, Any] = {"micro_batch": 4096, "inputs": 256, "width": 1024, "depth": 3}


def peak_verdict(whole_mib: float, accumulated_mib: float, ratio_max: float) -> Verdict:
    """The accumulated step's extra peak memory must be at most ``ratio_max`` of the whole's."""
    if whole_mib <= 0:
        return Verdict(FAIL, f"the whole-batch step showed no extra peak memory ({whole_mib} MiB)")
    ratio = accumulated_mib / whole_mib
    return Verdict(
        PASS if ratio <= ratio_max else FAIL,
        f"extra peak memory: accumulated {accumulated_mib:.0f} MiB vs whole batch "
        f"{whole_mib:.0f} MiB = {ratio:.2f} (needs <= {ratio_max:g})",
    )


def _peak_memory(run: Run, micro_batches: int) -> Verdict:
    """Extra peak GPU memory of a whole-batch and an accumulated step of the same model."""
    if not run.has_gpu:
        return not_applicable(NO_GPU)  # get_memory_info reads GPU allocators only
    tf, keras = run.tf, run.tf.keras
    device = run.compute_devices[0]
    name = device.replace("/device:", "")
    cfg = MEMORY
    x_np, y_np = synthetic_data(cfg["micro_batch"] * micro_batches, cfg["inputs"], 8, 0)
    with tf.device(device):
        x, y = tf.constant(x_np), tf.constant(y_np)
        model = mlp(keras, inputs=cfg["inputs"], width=cfg["width"], depth=cfg["depth"], outputs=8)
        optimizer = keras.optimizers.SGD(0.01)
        optimizer.build(model.trainable_variables)
        extra = {}
        for label, step in zip_strict(
            ("whole", "accumulated"), _steps(tf, model, optimizer, micro_batches)
        ):
            float(step(x, y))  # trace and warm outside the measurement
            tf.config.experimental.reset_memory_stats(name)
            before = tf.config.experimental.get_memory_info(name)["current"]
            float(step(x, y))
            peak = tf.config.experimental.get_memory_info(name)["peak"]
            extra[label] = (peak - before) / 2**20
    run.metrics.update(peak_extra_mib_whole=extra["whole"], peak_extra_mib=extra["accumulated"])
    ratio_max = run.threshold("grad_accumulation_peak_ratio_max")
    return peak_verdict(extra["whole"], extra["accumulated"], ratio_max)


def _initial_weights(keras: Any, cfg: dict[str, Any], seed: int) -> list[Any]:
    """The starting weights, rebuilt from the same seed, to prove that training moved them."""
    return mlp(
        keras, inputs=cfg["inputs"], width=cfg["width"], depth=cfg["depth"], outputs=8, seed=seed
    ).get_weights()


if __name__ == "__main__":
    raise SystemExit(main("grad_accumulation", body, description=__doc__.splitlines()[0]))
