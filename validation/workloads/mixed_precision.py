"""Mixed precision: float32 vs mixed_float16 (compute capability >= 7.0) and mixed_bfloat16 (8.0).

Run: ``python -m validation.workloads.mixed_precision [--quick] [--json PATH]``

Speed: the ResNet-50 reference step (validation.workloads._refsteps) at the float batch DLE
used, float32 (TF32 from compute capability 8.0) against each policy, XLA off in every arm;
``mixed_precision.speedup.fp16``/``.bf16`` judged against run.floor (DLE's AMP/TF32 ratio x a
margin). A toy MLP cannot show the speed-up on TF32 GPUs (the TF guide says so), so the small
MLP only checks correctness: the mixed loss stays finite and close to float32's from the same
initial weights, float16 training through a LossScaleOptimizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpufleet.compat import zip_strict
from validation.harness import FAIL, PASS, Verdict
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
# Blocks of 5 steps (0.5-1.7 s on an A100; README "Time budget").
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


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    base = float_precision(run.compute_capability)
    ref_batch = cfg["ref_batch"] or batch_per_gpu("resnet50", base, run.gpu_model)
    run.config.update(
        model="MLP (Dense + ReLU), float32 output layer (correctness)",
        speed_model=f"ResNet-50 v1.5 reference step, batch {ref_batch}, XLA off",
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
            run.step("ab", f"ResNet-50 {base} vs {precision}, batch {ref_batch}", device)
            sizes = {"batch": ref_batch, "steps": cfg["steps"], "jit_compile": False}
            if baseline_block is None:
                baseline_block = reference_block(run, base, **sizes)
            result = run.ab(
                f"{policy}_speedup",
                metric,
                run.timed(base, baseline_block),
                run.timed(precision, reference_block(run, precision, **sizes)),
                threshold=threshold,
                pairs=cfg["pairs"],
                device=device,
                not_applicable=skip,
            )
            if result is not None:
                run.measurements[f"ab_{policy}"] = result.to_dict()


if __name__ == "__main__":
    raise SystemExit(main("mixed_precision", body, description=__doc__.splitlines()[0]))
