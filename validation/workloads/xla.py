"""XLA: the same training step with and without jit_compile=True; compiled, faster, same results.

Run: ``python -m validation.workloads.xla [--quick] [--json PATH]``

Speed: the ResNet-50 reference step (validation.workloads._refsteps) plain and with XLA, at
float32 as this GPU runs it (TF32 from compute capability 8.0) and at AMP; the speed-ups
``xla.speedup.<tf32|fp32>`` and ``xla.speedup.amp`` are judged against run.floor. A small MLP
(GELU + LayerNormalization: many small kernels XLA fuses) checks correctness: same losses, and
evidence that XLA really compiled (the optimized HLO contains fusions). Keras leaves XLA off on
CPU and under any distribution strategy unless jit_compile=True is passed, so every step
passes jit_compile explicitly.
"""

from __future__ import annotations

import math
from typing import Any

from gpufleet.compat import zip_strict
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.workloads._batch import batch_for
from validation.workloads._common import Run, main
from validation.workloads._refsteps import float_precision
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


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    base = float_precision(run.compute_capability)
    run.config.update(
        model="MLP, GELU + LayerNormalization per layer (correctness)",
        speed_model="ResNet-50 v1.5 reference step, plain vs jit_compile=True",
        device=device,
    )
    x_np, y_np = synthetic_data(cfg["batch"], cfg["inputs"], 16, run.args.seed)
    with tf.device(device):
        x, y = tf.constant(x_np), tf.constant(y_np)
        steps = {}
        for name, jit in (("plain", False), ("xla", True)):
            # Identical seeds give identical initial weights, so the losses can be compared.
            model = mlp(
                keras,
                inputs=cfg["inputs"],
                width=cfg["width"],
                depth=cfg["depth"],
                outputs=16,
                activation="gelu",
                layer_norm=True,
                seed=run.args.seed,
            )
            steps[name] = train_step(tf, model, keras.optimizers.SGD(0.01), jit_compile=jit)

        losses: dict[str, list[float]] = {name: [] for name in steps}
        for index in range(1 if run.warm else cfg["check_steps"]):  # a warm-up: each once
            for name, step in steps.items():
                losses[name].append(float(step(x, y)))
            run.step(
                "check",
                f"step {index} plain={losses['plain'][-1]:.6f} xla={losses['xla'][-1]:.6f}",
                device,
            )
        run.measurements["losses"] = losses
        if not run.warm:  # a cache warm-up judges nothing
            _judge_mlp(run, cfg, steps, losses, (x, y))

    # Without a GPU only the float arm runs: XLA compiles each ResNet step for 10-25 s on a
    # 2-core CPU, and float16 there falls back to Eigen kernels nobody runs in production.
    fp16_cores = run.has_gpu and (run.compute_capability or (0, 0)) >= (7, 0)
    for precision in (base, "amp") if fp16_cores else (base,):
        # Both arms at one batch: the plain one's (no XLA) must fit (review 2 N7).
        batch = cfg["ref_batch"] or batch_for(run, "resnet50", precision, xla=False)
        run.config.setdefault("batch_per_precision", {})[precision] = batch
        metric = f"xla.speedup.{precision}"
        threshold, skip = speed_skip(run, metric)
        run.step("ab", f"ResNet-50 {precision} batch {batch}: plain vs XLA", device)
        arms = [
            run.timed(
                f"{precision}_{name}",
                reference_block(run, precision, batch=batch, steps=cfg["steps"], jit_compile=jit),
            )
            for name, jit in (("plain", False), ("xla", True))
        ]
        result = run.ab(
            f"xla_speedup_{precision}",
            metric,
            *arms,
            threshold=threshold,
            pairs=cfg["pairs"],
            device=device,
            not_applicable=skip,
        )
        if result is not None:
            run.measurements[f"ab_{precision}"] = result.to_dict()


def _judge_mlp(
    run: Run,
    cfg: dict[str, Any],
    steps: dict[str, Any],
    losses: dict[str, list[float]],
    batch: tuple[Any, Any],
) -> None:
    """The MLP's checks: plain and XLA losses match, and XLA fused (its optimized HLO)."""
    x, y = batch
    rtol = run.threshold("xla_loss_rtol")
    worst = max(relative_difference(a, b) for a, b in zip_strict(losses["xla"], losses["plain"]))
    run.metrics["loss_max_relative_difference"] = worst
    finite = all(map(math.isfinite, losses["xla"] + losses["plain"]))
    run.add_check(
        "losses_match",
        "correctness",
        Verdict(
            PASS if finite and worst <= rtol else FAIL,
            f"XLA vs plain losses over {cfg['check_steps']} steps: max relative difference "
            f"{worst:.2e} (tolerance {rtol:.0e}){'' if finite else '; non-finite loss'}",
        ),
    )

    hlo = steps["xla"].experimental_get_compiler_ir(x, y)(stage="optimized_hlo")
    run.metrics["hlo_fusion_mentions"] = hlo.count("fusion")
    run.add_check(
        "xla_compiled",
        "evidence",
        Verdict(
            PASS if "fusion" in hlo else FAIL,
            f"optimized HLO of the jit_compile step mentions 'fusion' {hlo.count('fusion')} times"
            if "fusion" in hlo
            else "optimized HLO has no fusion: XLA did not fuse anything",
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main("xla", body, description=__doc__.splitlines()[0]))
