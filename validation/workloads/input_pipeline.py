"""tf.data: naive vs parallel map + prefetch, against preprocessed batches held in host memory.

Run: ``python -m validation.workloads.input_pipeline [--quick] [--json PATH]``

Each sample gets real per-sample work on the CPU (cast, bicubic resize, contrast,
standardize), every time it is read: nothing is cached, so the timed arms run ``map``. Three
sources feed the same training step of a few milliseconds, each ending in the same
``prefetch_to_device`` (so every arm pays the same overlapped host-to-device copy, review 2 N4):
preprocessed batches held in host memory (the ceiling), the naive pipeline (sequential map,
tf.data's default optimizations and autotune off, so nothing parallelises or prefetches it
behind our back) and the tuned one (`map(num_parallel_calls=AUTOTUNE)`, `prefetch(AUTOTUNE)`).
The preprocessing is sized per run to about 3x the step (``rounds_for``), so a slow GPU's long
step does not hide it. Verdicts: the tuned pipeline keeps the device busy
(``device_busy_fraction`` = ceiling time / tuned time, against
run.floor("input_pipeline.device_busy_fraction")); it is >= k x faster than the naive one on a
host with enough cores (thresholds input_pipeline_tuned_speedup_min / _min_cores), judged only
where the naive pipeline is measurably slower than the ceiling (``naive_gate``); NVML sees the
GPU busy through a tuned-only phase of several seconds (N5); both pipelines yield the same
batches.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from validation.verdicts.harness import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    HarnessError,
    Verdict,
    judge_samples,
    time_call,
)
from validation.workloads._common import NO_GPU, Run, main, not_applicable
from validation.workloads._devices import nvml_index
from validation.workloads._refsteps import device_sync
from validation.workloads._throughput import speed_skip
from validation.workloads._training import mlp, train_step

QUICK: dict[str, Any] = {"samples": 256, "image": 32, "resized": 24, "batch": 32}
QUICK |= {"width": 128, "depth": 2, "steps": 8, "pairs": 6, "busy_s": 0.0}
# GPU: a step of ~1-35 ms (H100..T4) against 5-15 ms of sequential preprocessing per batch,
# scaled up per run to about PREP_OVER_STEP x the step (rounds_for).
QUICK_GPU: dict[str, Any] = {"samples": 4096, "image": 64, "resized": 48, "batch": 256}
QUICK_GPU |= {"width": 4096, "depth": 3, "steps": 16, "pairs": 6, "busy_s": 0.0}
# The busy phase: one NVML reading per 1 s window survives thinning, and the first window is
# dropped; judge_samples needs 6 at 95 %, so 9 s leave 7-8 (review 2 N5).
FULL: dict[str, Any] = {**QUICK_GPU, "samples": 8192, "depth": 4, "steps": 32, "pairs": 8}
FULL |= {"busy_s": 9.0}
CLASSES = 10
BUSY_PHASE = "tuned_busy"
PREP_OVER_STEP = 3.0  # preprocessing per batch over the step: starvation is plain to see
MOST_ROUNDS = 8
NAIVE_OVER_CEILING = 1.5  # below it the naive arm is not starved, so speed-up is meaningless


def rounds_for(step_s: float, prep_s: float, *, target: float = PREP_OVER_STEP) -> int:
    """Rounds of per-sample work that make the preprocessing of a batch about ``target`` x the
    step (1 .. MOST_ROUNDS): ``prep_s`` is one round's sequential time per batch."""
    if not (step_s > 0 and prep_s > 0) or not math.isfinite(step_s / prep_s):
        return 1
    return max(1, min(MOST_ROUNDS, math.ceil(target * step_s / prep_s)))


def naive_gate(naive_s: float, ceiling_s: float) -> str | None:
    """Why tuned-vs-naive is not judged (the naive arm is not starved: its time is within
    NAIVE_OVER_CEILING x the ceiling's), or None."""
    if ceiling_s > 0 and naive_s > NAIVE_OVER_CEILING * ceiling_s:
        return None
    return (
        f"not judged: the naive pipeline ({naive_s * 1e3:.1f} ms a block) is not over "
        f"{NAIVE_OVER_CEILING:g} x the ceiling ({ceiling_s * 1e3:.1f} ms): the step hides the "
        "preprocessing, so no pipeline can be faster"
    )


def busy_cores(min_cores: int) -> int:
    """Cores the busy checks need: the tuned pipeline must do PREP_OVER_STEP steps' worth of
    preprocessing per step, so at twice that many cores it keeps up with room to spare."""
    return max(min_cores, math.ceil(2 * PREP_OVER_STEP))


def _preprocess(tf: Any, cfg: dict[str, Any], rounds: int) -> Any:
    """Per-sample work a real pipeline does: decode-like cast, resize, standardize, flatten;
    ``rounds`` > 1 resizes up and down again that many times (each round depends on the last,
    so none can be folded away)."""
    resized, size = cfg["resized"], cfg["image"]

    def fn(image: Any, label: Any) -> tuple[Any, Any]:
        x = tf.cast(image, tf.float32) / 255.0
        x = tf.image.resize(x, [resized, resized], method="bicubic")
        for _ in range(rounds - 1):
            x = tf.image.resize(x, [size, size], method="bicubic")
            x = tf.image.resize(x, [resized, resized], method="bicubic")
        x = tf.image.adjust_contrast(x, 1.2)
        x = tf.image.per_image_standardization(x)
        return tf.reshape(x, [-1]), tf.one_hot(label, CLASSES)

    return fn


def _pipelines(
    tf: Any, images: np.ndarray, labels: np.ndarray, cfg: dict[str, Any], rounds: int, device: str
) -> dict:
    fn = _preprocess(tf, cfg, rounds)
    source = tf.data.Dataset.from_tensor_slices((images, labels))
    naive_options = tf.data.Options()
    naive_options.experimental_optimization.apply_default_optimizations = False
    naive_options.autotune.enabled = False
    # Every arm ends in the same copy to the device, overlapped with the step (review 2 N4).
    to_device = tf.data.experimental.prefetch_to_device(device)
    naive = (
        source.map(fn)
        .batch(cfg["batch"], drop_remainder=True)
        .repeat()
        .apply(to_device)
        .with_options(naive_options)  # last: the copy does not pass its input's options on
    )
    tuned = (
        source.map(fn, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(cfg["batch"], drop_remainder=True)
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
        .apply(to_device)
    )
    return {"naive": naive, "tuned": tuned}


def _ceiling(tf: Any, tuned: Any, batches: int, device: str) -> Any:
    """The ceiling: ``batches`` preprocessed batches kept in host memory, read in a loop and
    copied to the device like the pipelines' (only the preprocessing is missing)."""
    host = [(x.numpy(), y.numpy()) for x, y in tuned.take(batches)]
    xs, ys = np.stack([x for x, _ in host]), np.stack([y for _, y in host])
    return (
        tf.data.Dataset.from_tensor_slices((xs, ys))
        .repeat()
        .apply(tf.data.experimental.prefetch_to_device(device))
    )


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, as tf.data's threads see it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _check_agree(run: Run, pipelines: dict, batches: int) -> None:
    """Same batches from both pipelines: tuning must not change what the model sees."""
    naive_it, tuned_it = iter(pipelines["naive"]), iter(pipelines["tuned"])
    worst = 0.0
    for _ in range(min(batches, 4)):
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


def _prep_seconds(tf: Any, images: np.ndarray, labels: np.ndarray, cfg: dict[str, Any]) -> float:
    """One round's sequential preprocessing time per batch, on the host alone."""
    fn = _preprocess(tf, cfg, 1)
    batch = tf.data.Dataset.from_tensor_slices((images[: cfg["batch"]], labels[: cfg["batch"]]))
    batch = batch.map(fn).batch(cfg["batch"])
    for _ in batch:  # trace the map function outside the timing
        pass
    start = time.perf_counter()
    for _ in batch:
        pass
    return time.perf_counter() - start


def body(run: Run) -> None:
    tf, keras = run.tf, run.tf.keras
    cfg = run.sizes(QUICK, QUICK_GPU, FULL)
    device = run.compute_devices[0]
    features = cfg["resized"] ** 2 * 3
    run.config.update(
        device=device,
        features=features,
        tuned="map(AUTOTUNE) -> batch -> repeat -> prefetch(AUTOTUNE) -> prefetch_to_device",
        naive="map -> batch -> repeat -> prefetch_to_device; default optimizations and "
        "autotune off",
        ceiling="preprocessed batches in host memory -> repeat -> prefetch_to_device",
        cpu_cores=usable_cores(),
    )
    rng = np.random.default_rng(run.args.seed)
    images = rng.integers(0, 256, (cfg["samples"], cfg["image"], cfg["image"], 3), np.uint8)
    labels = rng.integers(0, CLASSES, cfg["samples"]).astype(np.int32)
    batches_per_epoch = cfg["samples"] // cfg["batch"]

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
    sync = device_sync(tf, model.trainable_variables)

    def from_iterator(iterator: Any) -> Any:
        def go() -> float:
            loss: Any = None
            for _ in range(cfg["steps"]):
                x, y = next(iterator)
                loss = step(x, y)
            sync()  # the last step's backward too (review 2 N24)
            return float(loss)

        return go

    # Size the preprocessing: S (a step from the ceiling) against P (one round, one batch).
    first = _pipelines(tf, images, labels, cfg, 1, device)
    probe = from_iterator(iter(_ceiling(tf, first["tuned"], batches_per_epoch, device)))
    probe()  # trace the step
    step_s = min(time_call(probe) for _ in range(3)) / cfg["steps"]
    prep_s = _prep_seconds(tf, images, labels, cfg)
    rounds = rounds_for(step_s, prep_s) if run.has_gpu else 1
    run.config.update(preprocess_rounds=rounds)
    run.measurements.update(step_seconds=step_s, prep_seconds_per_round=prep_s)
    pipelines = first if rounds == 1 else _pipelines(tf, images, labels, cfg, rounds, device)
    _check_agree(run, pipelines, batches_per_epoch)
    ceiling = _ceiling(tf, pipelines["tuned"], batches_per_epoch, device)

    from_memory = from_iterator(iter(ceiling))
    finite = all(math.isfinite(from_memory()) for _ in range(2))
    run.step("ab", f"in-memory vs tuned pipeline, {cfg['steps']} steps per repetition", device)
    threshold, skip = speed_skip(run, "input_pipeline.device_busy_fraction")
    cores = usable_cores()
    min_cores = int(run.threshold("input_pipeline_min_cores"))
    few = None
    if cores < busy_cores(min_cores):
        few = f"{cores} CPU core(s): the busy checks are judged from {busy_cores(min_cores)}"
    skip = skip or few
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
    naive = from_iterator(iter(pipelines["naive"]))
    skip = run.speed_not_applicable
    if skip is None and cores < min_cores:
        skip = f"{cores} CPU core(s): the speed-up over naive is judged from {min_cores}"
    if skip is None:
        naive_s, ceiling_s = time_call(naive), min(time_call(from_memory) for _ in range(2))
        run.measurements.update(naive_block_seconds=naive_s, ceiling_block_seconds=ceiling_s)
        skip = naive_gate(naive_s, ceiling_s)
    run.step("ab", f"naive vs tuned pipeline on {cores} cores", device)
    versus = run.ab(
        "tuned_faster_than_naive",
        "tuned_speedup_vs_naive",
        run.timed("naive", naive),
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
    _busy_phase(run, from_iterator(iter(pipelines["tuned"])), cfg["busy_s"], few)


def _busy_phase(run: Run, tuned: Any, seconds: float, few_cores: str | None) -> None:
    """Train from the tuned pipeline alone for ``seconds`` and judge NVML's utilization of the
    GPU: the A/B's alternating stretches are shorter than NVML's window (review 2 N5)."""
    floor = run.threshold("input_pipeline_gpu_utilization_min")
    if not run.has_gpu:
        run.add_check("gpu_busy_tuned", "utilization", not_applicable(NO_GPU))
        return
    if few_cores:
        run.add_check("gpu_busy_tuned", "utilization", not_applicable(few_cores))
        return
    if seconds <= 0:
        quick = "the quick tier runs no busy phase (the full tier's lasts 9 s)"
        run.add_check("gpu_busy_tuned", "utilization", not_applicable(quick))
        return
    if run.sampler is None or not run.sampler.available:
        why = run.sampler.unavailable_reason if run.sampler else "sampler not started"
        run.add_check("gpu_busy_tuned", "utilization", Verdict(INCONCLUSIVE, f"no NVML: {why}"))
        return
    with run.phase(BUSY_PHASE):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tuned()
    key = f"gpu{nvml_index(0)}"  # the GPU that TensorFlow trains on
    # One reading per NVML averaging window, none from the window after the phase began:
    # neighbouring 0.1 s readings repeat the same average and are not independent samples.
    samples = [s.utilization_pct for s in run.sampler.thinned(BUSY_PHASE, key)]
    run.measurements["tuned_gpu_utilization_samples"] = samples
    run.add_check("gpu_busy_tuned", "utilization", busy_verdict(samples, floor, key))
    if samples:
        run.metrics["tuned_gpu_utilization_mean"] = float(np.mean(samples))


def busy_verdict(samples: list[float], floor: float, key: str) -> Verdict:
    """The median of the busy phase's independent NVML readings against ``floor`` (%)."""
    try:
        _, verdict = judge_samples(samples, threshold=floor, what=f"{key} utilization % (median)")
    except HarnessError as exc:
        return Verdict(INCONCLUSIVE, f"{len(samples)} independent NVML sample(s) of {key}: {exc}")
    return verdict


if __name__ == "__main__":
    raise SystemExit(main("input_pipeline", body, description=__doc__.splitlines()[0]))
