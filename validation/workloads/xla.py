"""XLA: the same training step with and without jit_compile=True; compiled, faster, same results.

Run: ``python -m validation.workloads.xla [--quick] [--json PATH]``

Keras leaves XLA off on CPU and under any distribution strategy unless jit_compile=True is
passed, so both steps pass jit_compile explicitly. Evidence that XLA really compiled: the
optimized HLO of the compiled step contains fusions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
    "batch": 64,
    "inputs": 128,
    "width": 256,
    "depth": 3,
    "steps": 5,
    "check_steps": 3,
    "pairs": 8,
}
QUICK_GPU: dict[str, Any] = {
    "batch": 256,
    "inputs": 1024,
    "width": 2048,
    "depth": 4,
    "steps": 20,
    "check_steps": 3,
    "pairs": 8,
}
FULL: dict[str, Any] = {
    "batch": 512,
    "inputs": 1024,
    "width": 2048,
    "depth": 6,
    "steps": 30,
    "check_steps": 5,
    "pairs": 12,
}


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    run.config.update(model="MLP, GELU + LayerNormalization per layer", device=device)
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
        for index in range(cfg["check_steps"]):
            for name, step in steps.items():
                losses[name].append(float(step(x, y)))
            run.step(
                "check",
                f"step {index} plain={losses['plain'][-1]:.6f} xla={losses['xla'][-1]:.6f}",
                device,
            )
        run.measurements["losses"] = losses
        rtol = run.threshold("xla_loss_rtol")
        worst = max(
            relative_difference(a, b) for a, b in zip_strict(losses["xla"], losses["plain"])
        )
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
                f"optimized HLO of the jit_compile step mentions 'fusion' "
                f"{hlo.count('fusion')} times"
                if "fusion" in hlo
                else "optimized HLO has no fusion: XLA did not fuse anything",
            ),
        )

        def timed(name: str) -> Callable[[], object]:
            return run.timed(name, repeat_steps(steps[name], (x, y), cfg["steps"]))

        run.step("ab", f"{cfg['pairs']} pairs of {cfg['steps']} steps after warm-up", device)
        result = run.ab(
            "xla_speedup",
            "speedup",
            timed("plain"),
            timed("xla"),
            threshold=run.threshold("xla_speedup_min"),
            pairs=cfg["pairs"],
            device=device,
            not_applicable=run.speed_not_applicable,
        )
    if result is not None:
        run.measurements["ab"] = result.to_dict()


if __name__ == "__main__":
    raise SystemExit(main("xla", body, description=__doc__.splitlines()[0]))
