"""tf.data: a naive pipeline vs parallel map + prefetch, against in-memory tensors.

Run: ``python -m validation.workloads.input_pipeline [--quick] [--json PATH]``

Each sample gets real per-sample work on the CPU (cast, bicubic resize, contrast,
standardize), every time it is read: nothing is cached, so the timed arms run ``map``. Three
sources feed the same compiled training step of a few milliseconds: batches already in device
memory (the ceiling), the naive pipeline (sequential map, tf.data's default optimizations and
autotune off, so nothing parallelises or prefetches it behind our back) and the tuned one
(`map(num_parallel_calls=AUTOTUNE)`, `prefetch(AUTOTUNE)`). Verdicts: the tuned pipeline keeps
the device busy (``device_busy_fraction`` = in-memory time / tuned time, against
run.floor("input_pipeline.device_busy_fraction")) and is >= k x faster than the naive one on a
host with enough cores (thresholds input_pipeline_tuned_speedup_min / _min_cores); both
pipelines yield the same batches.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from validation.verdicts.harness import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    HarnessError,
    Verdict,
    judge_samples,
)
from validation.workloads._common import NO_GPU, Run, main, not_applicable
from validation.workloads._devices import nvml_index
from validation.workloads._throughput import speed_skip
from validation.workloads._training import mlp, train_step

QUICK: dict[str, Any] = {"samples": 256, "image": 32, "resized": 24, "batch": 32}
QUICK |= {"width": 128, "depth": 2, "steps": 8, "pairs": 6}
# GPU: a step of ~1-7 ms (A100..V100) against 5-15 ms of sequential preprocessing per batch.
QUICK_GPU: dict[str, Any] = {"samples": 4096, "image": 64, "resized": 48, "batch": 256}
QUICK_GPU |= {"width": 4096, "depth": 3, "steps": 16, "pairs": 6}
FULL: dict[str, Any] = {**QUICK_GPU, "samples": 8192, "depth": 4, "steps": 32, "pairs": 8}
CLASSES = 10


def _preprocess(tf: Any, resized: int) -> Any:
    """Per-sample work a real pipeline does: decode-like cast, resize, standardize, flatten."""

    def fn(image: Any, label: Any) -> tuple[Any, Any]:
        x = tf.cast(image, tf.float32) / 255.0
        x = tf.image.resize(x, [resized, resized], method="bicubic")
        x = tf.image.adjust_contrast(x, 1.2)
        x = tf.image.per_image_standardization(x)
        return tf.reshape(x, [-1]), tf.one_hot(label, CLASSES)

    return fn


def _pipelines(tf: Any, images: np.ndarray, labels: np.ndarray, cfg: dict[str, Any]) -> dict:
    fn = _preprocess(tf, cfg["resized"])
    source = tf.data.Dataset.from_tensor_slices((images, labels))
    naive_options = tf.data.Options()
    naive_options.experimental_optimization.apply_default_optimizations = False
    naive_options.autotune.enabled = False
    naive = (
        source.map(fn).batch(cfg["batch"], drop_remainder=True).repeat().with_options(naive_options)
    )
    tuned = (
        source.map(fn, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(cfg["batch"], drop_remainder=True)
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )
    return {"naive": naive, "tuned": tuned}


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, as tf.data's threads see it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    features = cfg["resized"] ** 2 * 3
    run.config.update(
        device=device,
        features=features,
        tuned="map(AUTOTUNE) -> batch -> repeat -> prefetch(AUTOTUNE), no cache",
        naive="map -> batch -> repeat; default optimizations and autotune off",
        cpu_cores=usable_cores(),
    )
    rng = np.random.default_rng(run.args.seed)
    images = rng.integers(0, 256, (cfg["samples"], cfg["image"], cfg["image"], 3), np.uint8)
    labels = rng.integers(0, CLASSES, cfg["samples"]).astype(np.int32)
    pipelines = _pipelines(tf, images, labels, cfg)
    batches_per_epoch = cfg["samples"] // cfg["batch"]

    # Same batches from both pipelines: tuning must not change what the model sees.
    naive_it, tuned_it = iter(pipelines["naive"]), iter(pipelines["tuned"])
    worst = 0.0
    for _ in range(min(batches_per_epoch, 4)):
        (xn, yn), (xt, yt) = next(naive_it), next(tuned_it)
        worst = max(
            worst,
            float(np.abs(xn.numpy() - xt.numpy()).max()),
            float(np.abs(yn.numpy() - yt.numpy()).max()),
        )
    run.add_check(
        "pipelines_agree",
        "correctness",
        Verdict(
            PASS if worst <= 1e-5 else FAIL,
            f"naive and tuned pipelines' first batches differ by at most {worst:.1e} "
            "(tolerance 1e-5)",
        ),
    )

    with tf.device(device):
        model = mlp(
            keras,
            inputs=features,
            width=cfg["width"],
            depth=cfg["depth"],
            outputs=CLASSES,
            seed=run.args.seed,
        )
        step = train_step(tf, model, keras.optimizers.SGD(0.01), jit_compile=False)
        in_memory = [
            tuple(tf.identity(t) for t in batch)
            for batch in pipelines["tuned"].take(batches_per_epoch)
        ]

    def from_memory() -> float:
        loss: Any = None
        for index in range(cfg["steps"]):
            loss = step(*in_memory[index % len(in_memory)])
        return float(loss)

    def from_iterator(iterator: Any) -> Any:
        def go() -> float:
            loss: Any = None
            for _ in range(cfg["steps"]):
                x, y = next(iterator)
                loss = step(x, y)
            return float(loss)

        return go

    finite = all(math.isfinite(from_memory()) for _ in range(2))
    run.step("ab", f"in-memory vs tuned pipeline, {cfg['steps']} steps per repetition", device)
    threshold, skip = speed_skip(run, "input_pipeline.device_busy_fraction")
    busy = run.ab(
        "tuned_keeps_device_busy",
        "device_busy_fraction",
        run.timed("in_memory", from_memory),
        run.timed("tuned", from_iterator(iter(pipelines["tuned"]))),
        threshold=threshold,
        pairs=cfg["pairs"],
        device=device,
        not_applicable=skip,
    )
    if busy is not None:
        run.measurements["ab_busy"] = busy.to_dict()
    cores = usable_cores()
    min_cores = int(run.threshold("input_pipeline_min_cores"))
    skip = run.speed_not_applicable
    if skip is None and cores < min_cores:
        skip = f"{cores} CPU core(s): the speed-up over naive is judged from {min_cores}"
    run.step("ab", f"naive vs tuned pipeline on {cores} cores", device)
    versus = run.ab(
        "tuned_faster_than_naive",
        "tuned_speedup_vs_naive",
        run.timed("naive", from_iterator(iter(pipelines["naive"]))),
        run.timed("tuned", from_iterator(iter(pipelines["tuned"]))),
        threshold=run.threshold("input_pipeline_tuned_speedup_min"),
        pairs=cfg["pairs"],
        device=device,
        not_applicable=skip,
    )
    if versus is not None:
        run.measurements["ab_naive"] = versus.to_dict()
    run.add_check(
        "losses_finite",
        "correctness",
        Verdict(
            PASS if finite else FAIL, "training losses finite" if finite else "non-finite loss"
        ),
    )

    floor = run.threshold("input_pipeline_gpu_utilization_min")
    if not run.has_gpu:
        run.add_check("gpu_busy_tuned", "utilization", not_applicable(NO_GPU))
        return
    if run.sampler is None or not run.sampler.available:
        why = run.sampler.unavailable_reason if run.sampler else "sampler not started"
        run.add_check("gpu_busy_tuned", "utilization", Verdict(INCONCLUSIVE, f"no NVML: {why}"))
        return
    key = f"gpu{nvml_index(0)}"  # the GPU that TensorFlow trains on
    # One reading per NVML averaging window, none from the window after the phase began:
    # neighbouring 0.1 s readings repeat the same average and are not independent samples.
    samples = [s.utilization_pct for s in run.sampler.thinned("tuned", key)]
    run.measurements["tuned_gpu_utilization_samples"] = samples
    if len(samples) < 3:
        run.add_check(
            "gpu_busy_tuned",
            "utilization",
            Verdict(
                INCONCLUSIVE,
                f"only {len(samples)} independent NVML sample(s) of {key} (one per "
                f"{run.sampler.window_s:g} s) while the tuned pipeline ran",
            ),
        )
        return
    run.metrics["tuned_gpu_utilization_mean"] = float(np.mean(samples))
    try:
        _, verdict = judge_samples(samples, threshold=floor, what=f"{key} utilization % (median)")
    except HarnessError as exc:
        verdict = Verdict(INCONCLUSIVE, f"measurement refused: {exc}")
    run.add_check("gpu_busy_tuned", "utilization", verdict)


if __name__ == "__main__":
    raise SystemExit(main("input_pipeline", body, description=__doc__.splitlines()[0]))
