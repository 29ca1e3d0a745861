"""Mixed precision: float32 vs mixed_float16 (compute capability >= 7.0) and mixed_bfloat16 (8.0).

Run: ``python -m validation.workloads.mixed_precision [--quick] [--json PATH]``

The model is a wide MLP (matmul-bound, widths multiples of 8, so tensor cores matter) with
the output layer kept float32. float16 trains through a LossScaleOptimizer. Checks: the mixed
loss stays finite and close to float32's from the same initial weights; speed-up per policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpufleet.compat import zip_strict
from validation.harness import FAIL, PASS, Verdict
from validation.workloads._common import Run, main, not_applicable
from validation.workloads._training import (
    mlp,
    relative_difference,
    repeat_steps,
    synthetic_data,
    train_step,
)

QUICK: dict[str, Any] = {
    "batch": 64,
    "inputs": 128,
    "width": 256,
    "depth": 3,
    "steps": 4,
    "check_steps": 3,
    "pairs": 8,
}
QUICK_GPU: dict[str, Any] = {
    "batch": 512,
    "inputs": 1024,
    "width": 4096,
    "depth": 3,
    "steps": 20,
    "check_steps": 3,
    "pairs": 8,
}
FULL: dict[str, Any] = {
    "batch": 1024,
    "inputs": 1024,
    "width": 4096,
    "depth": 4,
    "steps": 30,
    "check_steps": 5,
    "pairs": 12,
}
# (policy, threshold key, minimum compute capability for its tensor cores; DESIGN.md)
POLICIES = (
    ("mixed_float16", "mixed_precision_fp16_speedup_min", (7, 0)),
    ("mixed_bfloat16", "mixed_precision_bf16_speedup_min", (8, 0)),
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
    run.config.update(model="MLP (Dense + ReLU), float32 output layer", device=device)
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
        for policy, key, minimum in POLICIES:
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

            threshold = run.threshold(key)
            skip = run.speed_not_applicable
            if skip is None and threshold <= 0:
                skip = f"no speed-up floor for compute capability {run.compute_capability}"
            run.step("ab", f"float32 vs {policy}", device)
            result = run.ab(
                f"{policy}_speedup",
                f"{policy}_speedup",
                run.timed("float32", repeat_steps(baseline, (x, y), cfg["steps"])),
                run.timed(policy, repeat_steps(step, (x, y), cfg["steps"])),
                threshold=threshold,
                pairs=cfg["pairs"],
                device=device,
                not_applicable=skip,
            )
            if result is not None:
                run.measurements[f"ab_{policy}"] = result.to_dict()


if __name__ == "__main__":
    raise SystemExit(main("mixed_precision", body, description=__doc__.splitlines()[0]))
