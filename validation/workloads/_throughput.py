"""Per-GPU throughput of a reference step (ResNet-50, BERT-Large) against its published floor.

Shared by the resnet50 and bert_large workloads. Each precision (TF32 or FP32 as TensorFlow runs
float32 on this GPU, and AMP: mixed_float16 with loss scaling) builds its step, warms it up
until block times settle, then times blocks of steps that end with a device sync. The figure
is samples/s on one GPU (the GPU the process sees; the suite loops over the GPUs), named as the
floor it faces (``resnet50.images_per_s.amp``) so ``gpufleet thresholds --judge`` reads it.
"""

from __future__ import annotations

import gc
import math
from typing import Any

from validation.verdicts.harness import FAIL, PASS, Verdict, settled, time_call
from validation.workloads._batch import batch_for, figure_mismatch
from validation.workloads._common import Run, not_applicable
from validation.workloads._refsteps import (
    BERT_CPU,
    BERT_LARGE,
    FIGURES,
    RESNET50_CPU,
    RESNET50_GPU,
    build_step,
    float_precision,
)

ARCHITECTURES = {"resnet50": (RESNET50_CPU, RESNET50_GPU), "bert_large": (BERT_CPU, BERT_LARGE)}
UNITS = {"resnet50": "images/s", "bert_large": "sequences/s"}
# CPU: tiny widths, no XLA (proves the step trains). GPU: DLE's sizes with XLA, as DLE's
# published rows ran; the quick tier measures AMP only. Blocks of a few steps (0.5-1.4 s of
# ResNet-50 on an A100, docs/explanation/time-budget.md): the spread of the blocks, not their
# length, decides the verdict, and judge_sample_runs needs 3 per process (MIN_SAMPLES_FOR_VERDICT).
# The XLA compile is paid once per host (validation.workloads.xla_cache).
CPU: dict[str, Any] = {"batch": 4, "steps": 3, "blocks": 4, "warmup_max": 4, "jit_compile": False}
QUICK_GPU: dict[str, Any] = {"steps": 5, "blocks": 3, "warmup_max": 4, "jit_compile": True}
FULL_GPU: dict[str, Any] = {"steps": 5, "blocks": 3, "warmup_max": 4, "jit_compile": True}
# BERT-Large's step is 0.62-0.64 s on an A100 (DLE): 2 steps a block.
FULL_GPU_STEPS = {"resnet50": 5, "bert_large": 2}
WARM_TOLERANCE = 0.05


def precisions(run: Run) -> list[str]:
    """The precisions measured: float32 as this GPU runs it, and AMP (the quick tier on a GPU:
    AMP only, the figure every class of GPU publishes)."""
    if run.has_gpu and run.quick:
        return ["amp"]
    return [float_precision(run.compute_capability), "amp"]


def warm_up(block: Any, most: int) -> list[float]:
    """Call ``block`` until its last three times agree (harness.settled), at most ``most``."""
    times: list[float] = []
    while len(times) < max(most, 3):
        times.append(time_call(block))
        if settled(times, WARM_TOLERANCE):
            break
    return times


def speed_skip(run: Run, metric: str) -> tuple[float, str | None]:
    """The floor's value for ``metric`` and why it is not judged (no GPU, no floor), if so."""
    floor = run.floor(metric)
    value = floor.value if floor is not None and floor.value is not None else None
    skip = run.speed_not_applicable
    if skip is None and value is None and run.has_gpu:
        skip = f"not judged: {run.config['floors'][metric]['origin']}"
    # Without a GPU, skip is None only under the speed_verdicts_without_gpu test knob (the
    # sandbox's verdict-pipeline tests): CPU timings are then judged against 1.0 (no slowdown).
    return (value if value is not None else 1.0), skip


def judge_throughput(
    run: Run, name: str, precision: str, samples: list[float], batch: int | None = None
) -> None:
    """One precision's per-GPU figure against run.floor (reported even where not judged); a
    published floor is not applied at a ``batch`` other than its figure's (memory chose it)."""
    metric = f"{FIGURES[name]}.{precision}"
    threshold, skip = speed_skip(run, metric)
    if skip is None and batch is not None:
        skip = figure_mismatch(run.gpu_model, name, precision, batch)
    run.sample_check(
        f"throughput_{precision}",
        metric,
        samples,
        threshold=threshold,
        what=f"{UNITS[name]} per GPU ({precision})",
        not_applicable=skip,
    )


def training_verdict(losses: list[float], precision: str) -> Verdict:
    """A step that trains: finite losses that fall on its fixed synthetic batch."""
    finite = all(map(math.isfinite, losses))
    falls = finite and losses[-1] < losses[0]
    text = (
        f"{precision} loss after the first block {losses[0]:.4g}, after the last {losses[-1]:.4g}"
    )
    if not finite:
        return Verdict(FAIL, f"{text}: non-finite loss")
    return Verdict(
        PASS if falls else FAIL, f"{text}: {'falls' if falls else 'does not fall'} on a fixed batch"
    )


def reference_block(run: Run, precision: str, *, batch: int, steps: int, jit_compile: bool) -> Any:
    """A block of ``steps`` ResNet-50 steps at ``precision`` on the first compute device (tiny
    widths without a GPU), ending with a device sync: the arms of the speed-up A/Bs."""
    arch = RESNET50_GPU if run.has_gpu else RESNET50_CPU
    with run.tf.device(run.compute_devices[0]):
        step = build_step(
            run.tf,
            "resnet50",
            arch,
            precision,
            batch=batch,
            jit_compile=jit_compile,
            seed=run.args.seed,
        )
    return step.block(steps)


def body(run: Run, name: str) -> None:
    tf = run.tf
    cpu_arch, gpu_arch = ARCHITECTURES[name]
    cfg = run.sizes(CPU, QUICK_GPU, {**FULL_GPU, "steps": FULL_GPU_STEPS[name]})
    arch = gpu_arch if run.has_gpu else cpu_arch
    device = run.compute_devices[0]
    run.config.update(architecture=arch, device=device, data="fixed synthetic batch on device")
    for precision in precisions(run):
        if precision == "amp" and run.has_gpu and (run.compute_capability or (0, 0)) < (7, 0):
            why = f"float16 tensor cores need compute capability 7.0; {run.compute_capability}"
            run.add_check(f"trains_{precision}", "correctness", not_applicable(why))
            run.add_check(f"throughput_{precision}", "speed", not_applicable(why))
            continue
        batch = (
            batch_for(run, name, precision, xla=cfg["jit_compile"]) if run.has_gpu else cfg["batch"]
        )
        run.config.setdefault("batch_per_gpu", {})[precision] = batch
        run.step("build", f"{name} {precision} batch {batch} xla={cfg['jit_compile']}", device)
        with tf.device(device):
            step = build_step(
                tf,
                name,
                arch,
                precision,
                batch=batch,
                jit_compile=cfg["jit_compile"],
                seed=run.args.seed,
            )
            block = step.block(1 if run.warm else cfg["steps"])
            losses = [block()]  # the first call traces (and compiles with XLA)
            if not run.warm:  # a cache warm-up stops here: compiled, nothing timed
                warm = warm_up(block, cfg["warmup_max"])
                seconds = [time_call(run.timed(precision, block)) for _ in range(cfg["blocks"])]
                losses.append(block())
        if not run.warm:
            samples = [batch * cfg["steps"] / s for s in seconds]
            run.measurements.setdefault("seconds", {})[precision] = seconds
            run.measurements.setdefault("warmup_seconds", {})[precision] = warm
            run.measurements.setdefault("losses", {})[precision] = losses
            run.add_check(f"trains_{precision}", "correctness", training_verdict(losses, precision))
            judge_throughput(run, name, precision, samples, batch if run.has_gpu else None)
        del step, block
        tf.keras.backend.clear_session()
        gc.collect()
