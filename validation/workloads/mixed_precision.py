"""Mixed precision: float32 vs mixed_float16 (compute capability >= 7.0) and mixed_bfloat16 (8.0).

Run: ``python -m validation.workloads.mixed_precision [--quick] [--json PATH]``

Speed: the ResNet-50 reference step (validation.workloads._refsteps) in the configuration DLE
published its AMP/float pair in (gpufleet.floors.speedup): XLA on in both arms on a GPU
(the executables the resnet50 workload compiled, from XLA's persistent cache), each arm at
DLE's batch for its precision and the blocks sized to the same images, so the time ratio is the
throughput ratio. Without XLA Keras 3's batch norm is unfused float32 in both arms and the
step is memory-bound whatever the precision (review 2, N1). ``mixed_precision.speedup.fp16``
is judged against run.floor where DLE publishes the pair; elsewhere it is reported. A toy MLP
cannot show the speed-up on TF32 GPUs (the TF guide says so), so the small MLP only checks
correctness: the mixed loss stays finite and close to float32's from the same initial weights,
float16 training through a LossScaleOptimizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpufleet.compat import zip_strict
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.workloads._batch import figure_mismatch, fitting_batch, gpu_memory_mib
from validation.workloads._common import Run, main, not_applicable
from validation.workloads._refsteps import batch_per_gpu, float_precision
from validation.workloads._throughput import reference_block, speed_skip
from validation.workloads._training import (
    mlp,
    relative_difference,
    synthetic_data,
    train_step,
)

# The MLP (correctness) at one small size everywhere; the reference step's A/B sizes per tier.
QUICK: dict[str, Any] = {"batch": 64, "inputs": 128, "width": 256, "depth": 3, "check_steps": 3}
QUICK |= {"ref_batch": 4, "steps": 2, "pairs": 6}
QUICK_GPU: dict[str, Any] = {**QUICK, "ref_batch": None, "steps": 5, "pairs": 6}
# Blocks of 5 steps (0.5-1.7 s on an A100; docs/explanation/time-budget.md).
FULL: dict[str, Any] = {**QUICK, "check_steps": 5, "ref_batch": None, "steps": 5, "pairs": 8}
# (policy, precision of the reference step, floor's figure, minimum compute capability for
# its tensor cores; DESIGN.md)
POLICIES = (
    ("mixed_float16", "amp", "fp16", (7, 0)),
    ("mixed_bfloat16", "bf16", "bf16", (8, 0)),
)


def _unsupported(run: Run, minimum: tuple[int, int]) -> str | None:
    """Why a policy cannot speed up on this GPU, or None when it can (or there is no GPU)."""
    capability = run.compute_capability
    if run.has_gpu and (capability is None or capability < minimum):
        return (
            f"needs compute capability >= {minimum[0]}.{minimum[1]} for tensor cores; "
            f"this GPU has {capability}"
        )
    return None


def arms(
    base: str,
    precision: str,
    *,
    has_gpu: bool,
    gpu_model: str | None,
    batch: int | None,
    steps: int,
    memory_mib: float | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two arms' build sizes: XLA on with a GPU, DLE's batch per precision, and as many
    steps per block as give both arms the same images (the fewer-image arm's steps scaled up).

    Example: a V100 (FP32 batch 128, AMP 256), 5 steps: FP32 10 steps of 128, AMP 5 of 256.
    """
    sizes = []
    for p in (base, precision):
        # DLE's batch where it fits the GPU's memory (review 2 N7), else the largest that does.
        preferred = batch_per_gpu("resnet50", p, gpu_model)
        chosen = batch or fitting_batch("resnet50", p, preferred, memory_mib, xla=has_gpu)
        sizes.append({"batch": chosen, "steps": steps, "jit_compile": has_gpu})
    a, b = sizes
    big = max(a["batch"], b["batch"])
    for arm in sizes:
        if big % arm["batch"]:
            raise ValueError(f"batches {a['batch']} and {b['batch']} do not divide")
        arm["steps"] = steps * big // arm["batch"]
    return a, b


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    base = float_precision(run.compute_capability)
    run.config.update(
        model="MLP (Dense + ReLU), float32 output layer (correctness)",
        speed_model="ResNet-50 v1.5 reference step, each precision at DLE's batch, "
        f"XLA {'on' if run.has_gpu else 'off (CPU)'} in both arms",
        float_precision=base,
        device=device,
    )
    x_np, y_np = synthetic_data(cfg["batch"], cfg["inputs"], 16, run.args.seed)
    rtol = run.threshold("mixed_precision_loss_rtol")

    def build(policy: str) -> tuple[Any, Callable[..., Any]]:
        model = mlp(
            keras,
            inputs=cfg["inputs"],
            width=cfg["width"],
            depth=cfg["depth"],
            outputs=16,
            dtype=policy,
            seed=run.args.seed,
        )
        optimizer = keras.optimizers.SGD(0.01)
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        return model, train_step(
            tf, model, optimizer, jit_compile=False, loss_scale=policy == "mixed_float16"
        )

    with tf.device(device):
        x, y = tf.constant(x_np), tf.constant(y_np)
        _, baseline = build("float32")
        reference = [float(baseline(x, y)) for _ in range(cfg["check_steps"])]
        run.measurements["losses"] = {"float32": reference}
        baseline_block: Any = None
        for policy, precision, figure, minimum in POLICIES:
            unsupported = _unsupported(run, minimum)
            if unsupported:
                run.add_check(f"{policy}_loss", "correctness", not_applicable(unsupported))
                run.add_check(f"{policy}_speedup", "speed", not_applicable(unsupported))
                continue
            model, step = build(policy)
            dtypes = [layer.compute_dtype for layer in model.layers]
            wanted = "float16" if policy == "mixed_float16" else "bfloat16"
            applied = all(d == wanted for d in dtypes[:-1]) and dtypes[-1] == "float32"
            run.add_check(
                f"{policy}_applied",
                "evidence",
                Verdict(
                    PASS if applied else FAIL,
                    f"layer compute dtypes {dtypes}: hidden layers {wanted}, output float32"
                    if applied
                    else f"layer compute dtypes {dtypes}: expected hidden {wanted}, output float32",
                ),
            )
            losses = [float(step(x, y)) for _ in range(cfg["check_steps"])]
            run.measurements["losses"][policy] = losses
            worst = max(relative_difference(a, b) for a, b in zip_strict(losses, reference))
            finite = all(map(math.isfinite, losses))
            run.metrics[f"{policy}_loss_max_relative_difference"] = worst
            run.add_check(
                f"{policy}_loss",
                "correctness",
                Verdict(
                    PASS if finite and worst <= rtol else FAIL,
                    f"{policy} vs float32 losses over {cfg['check_steps']} steps: max relative "
                    f"difference {worst:.2e} (tolerance {rtol:.0e})"
                    f"{'' if finite else '; non-finite loss'}",
                ),
            )

            metric = f"mixed_precision.speedup.{figure}"
            threshold, skip = speed_skip(run, metric)
            size_a, size_b = arms(
                base,
                precision,
                has_gpu=run.has_gpu,
                gpu_model=run.gpu_model,
                batch=cfg["ref_batch"],
                steps=cfg["steps"],
                memory_mib=gpu_memory_mib(run) if run.has_gpu else None,
            )
            if skip is None and run.has_gpu:  # DLE's pair holds only at its batches
                skip = figure_mismatch(run.gpu_model, "resnet50", base, size_a["batch"])
                skip = skip or figure_mismatch(
                    run.gpu_model, "resnet50", precision, size_b["batch"]
                )
            run.config.setdefault("arms", {})[policy] = {base: size_a, precision: size_b}
            run.step("ab", f"ResNet-50 {base} {size_a} vs {precision} {size_b}", device)
            if baseline_block is None or baseline_block[0] != size_a:
                baseline_block = (size_a, reference_block(run, base, **size_a))
            result = run.ab(
                f"{policy}_speedup",
                metric,
                run.timed(base, baseline_block[1]),
                run.timed(precision, reference_block(run, precision, **size_b)),
                threshold=threshold,
                pairs=cfg["pairs"],
                device=device,
                not_applicable=skip,
            )
            if result is not None:
                run.measurements[f"ab_{policy}"] = result.to_dict()


if __name__ == "__main__":
    raise SystemExit(main("mixed_precision", body, description=__doc__.splitlines()[0]))
