"""GEMM: sustained matmul throughput of every GPU at once, per precision, against its peak.

Run: ``python -m validation.workloads.gemm [--quick] [--peak-tflops fp32=67,tf32=494,...]``

Every GPU multiplies 8192x8192 matrices at the same time, for ``sustain_s`` per precision
(20 s in the full tier, 2 s quick), so the host runs at full power and temperature and the
figures are sustained clocks, not boost. Per GPU the sustained TFLOP/s is the median of the
repetitions after the window's first quarter. The dense peaks come from gpufleet.matrix.gpus
for the GPU model (``--peak-tflops`` or GPUFLEET_PEAK_TFLOPS override them); each GPU is held
to the floor ``gemm.fraction_of_peak.<precision>`` (gpufleet.floors.derived, calibrated or not),
and a GPU more than 10 % below the host's median fails by name. NVML's SM clock, power,
temperature and clock-event reasons of the same window are attached to the checks.
Precisions follow the tensor cores: FP16 from compute capability 7.0, TF32 and BF16 from 8.0
(DESIGN.md). Every precision also multiplies a small matrix on every GPU and compares it with
numpy's float64 product. Metrics: ``tflops.<p>`` and ``fraction_of_peak.<p>`` ({gpu: value},
gpu as nvidia-smi numbers it), ``<p>_tflops`` / ``<p>_fraction_of_peak`` (the slowest GPU).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import numpy as np

from gpufleet.floors.derived import OUTLIER_BELOW_MEDIAN, Floor
from validation.host.nvml_telemetry import phase_telemetry, throttle_note
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.workloads._common import NO_GPU, Run, WorkloadError, main, not_applicable
from validation.workloads._devices import nvml_index
from validation.workloads._gemm_judge import judge, matrix_peaks, summarize

# Sizes per tier. ``sustain_s``: how long every GPU multiplies, all at once, per precision
# (issue 13: 20-60 s in the full tier, so power and thermal limits show, not boost clocks);
# the first ``settle`` share of the window is the clock ramp and is reported apart.
# ``min_reps``: repetitions even when one takes longer than the window (FP32 on a T4).
QUICK: dict[str, Any] = {"n": 256, "chain": 4, "sustain_s": 0.3, "min_reps": 3, "check_n": 128}
QUICK_GPU: dict[str, Any] = {"n": 8192, "chain": 8, "sustain_s": 2.0, "min_reps": 3, "check_n": 256}
FULL_GPU: dict[str, Any] = {"n": 8192, "chain": 8, "sustain_s": 20.0, "min_reps": 5, "check_n": 256}
# precision -> (TensorFlow dtype name, TF32 on?, minimum compute capability, relative tolerance
# of the small product against float64: about 2^-mantissa_bits * sqrt(n) with margin)
PRECISIONS: dict[str, Any] = {
    "fp32": ("float32", False, (0, 0), 1e-4),
    "tf32": ("float32", True, (8, 0), 1e-2),
    "fp16": ("float16", False, (7, 0), 1e-2),
    "bf16": ("bfloat16", False, (8, 0), 5e-2),
}


def parse_peaks(text: str | None) -> dict[str, float]:
    """{"fp32": 67.0, ...} from "fp32=67,fp16=989"; WorkloadError naming the bad part.

    Example:
        >>> parse_peaks("fp32=67,bf16=989")
        {'fp32': 67.0, 'bf16': 989.0}
    """
    peaks: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, equals, value = part.partition("=")
        if not equals:
            raise WorkloadError(
                f"--peak-tflops: {part!r} is not NAME=TFLOPS (for example fp16=989)"
            )
        name = name.strip().lower()
        if name not in PRECISIONS:
            raise WorkloadError(
                f"--peak-tflops: unknown precision {name!r} in {part!r}; "
                f"use {', '.join(PRECISIONS)}"
            )
        try:
            peaks[name] = float(value)
        except ValueError:
            raise WorkloadError(
                f"--peak-tflops: {part!r} is not NAME=TFLOPS (for example fp16=989)"
            ) from None
        if peaks[name] <= 0:
            raise WorkloadError(f"--peak-tflops: peak for {name} must be > 0; got {value}")
    return peaks


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--peak-tflops",
        default=os.environ.get("GPUFLEET_PEAK_TFLOPS"),
        metavar="fp32=X,tf32=X,fp16=X,bf16=X",
        help="dense peaks in TFLOP/s, overriding gpufleet.matrix.gpus' for this model",
    )


def _chain(tf: Any, chain: int) -> Any:
    """c <- c @ b, ``chain`` times: each matmul depends on the last, so none is elided."""

    @tf.function
    def run(c: Any, b: Any) -> Any:
        for _ in range(chain):
            c = tf.linalg.matmul(c, b)
        return c[0, 0]

    return run


def _worker(
    run: Run, name: str, cfg: dict[str, Any], device: str, start: threading.Barrier
) -> list[tuple[float, float]]:
    """One GPU's sustained window: (start offset, seconds) of every repetition.

    Each repetition ends with ``float()`` of an entry that depends on the whole chain, so its
    time covers every matmul (the device sync the timing needs)."""
    tf = run.tf
    dtype = getattr(tf, PRECISIONS[name][0])
    n = cfg["n"]
    rng = np.random.default_rng(run.args.seed)
    with tf.device(device):
        # b scaled by 1/sqrt(n) keeps the chained product's magnitude steady (no fp16 overflow).
        c = tf.cast(tf.constant(rng.standard_normal((n, n)), tf.float32), dtype)
        b = tf.cast(tf.constant(rng.standard_normal((n, n)) / np.sqrt(n), tf.float32), dtype)
        step = _chain(tf, cfg["chain"])
        float(step(c, b))  # warm-up: tracing, cuBLAS heuristics
        start.wait()  # every GPU starts its window together: the host at full load
        opened = time.perf_counter()
        reps: list[tuple[float, float]] = []
        while len(reps) < cfg["min_reps"] or time.perf_counter() - opened < cfg["sustain_s"]:
            began = time.perf_counter()
            float(step(c, b))
            reps.append((began - opened, time.perf_counter() - began))
    return reps


def _sustained(
    run: Run, name: str, cfg: dict[str, Any], window: list[float]
) -> dict[str, list[tuple[float, float]]]:
    """Every compute device's window, all at once (one thread each: TensorFlow releases the GIL
    while a GPU computes), keyed by the GPU's label. ``window`` gets the monotonic times the
    window opened (every warm-up done) and closed, for the telemetry of that span only."""
    devices = run.compute_devices
    start = threading.Barrier(len(devices), action=lambda: window.append(time.monotonic()))
    results: dict[str, list[tuple[float, float]]] = {}
    errors: list[BaseException] = []

    def one(device: str) -> None:
        try:
            results[_label(run, device)] = _worker(run, name, cfg, device, start)
        except BaseException as exc:  # re-raised below: a GPU that cannot compute fails
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=one, args=(d,), name=f"gemm-{d}") for d in devices]
    with run.phase(name):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    window.append(time.monotonic())
    broken = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if broken or errors:
        raise (broken or errors)[0]
    return results


def _label(run: Run, device: str) -> str:
    """A GPU as nvidia-smi numbers it ("3"), from TF's "/device:GPU:3" through the NVML
    mapping; the CPU device's own name without a GPU."""
    if not run.has_gpu:
        return device.replace("/device:", "").replace("/job:localhost/replica:0/task:0", "")
    return str(nvml_index(int(device.rsplit(":", 1)[1])))


def _product_error(run: Run, name: str, n: int, device: str) -> float:
    """Largest error of a small product relative to the largest float64 reference entry."""
    tf = run.tf
    dtype = getattr(tf, PRECISIONS[name][0])
    rng = np.random.default_rng(run.args.seed + 1)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    with tf.device(device):
        product = tf.linalg.matmul(
            tf.cast(tf.constant(a, tf.float32), dtype), tf.cast(tf.constant(b, tf.float32), dtype)
        )
        got = tf.cast(product, tf.float64).numpy()
    # The reference uses the inputs as rounded to the precision, so only the product is judged.
    rounded_a = tf.cast(tf.cast(tf.constant(a, tf.float32), dtype), tf.float64).numpy()
    rounded_b = tf.cast(tf.cast(tf.constant(b, tf.float32), dtype), tf.float64).numpy()
    reference = rounded_a @ rounded_b
    return float(np.abs(got - reference).max() / np.abs(reference).max())


def _product_check(run: Run, name: str, cfg: dict[str, Any], tolerance: float) -> None:
    """The small product on every device; the worst one decides, named."""
    errors = {
        _label(run, d): _product_error(run, name, cfg["check_n"], d) for d in run.compute_devices
    }
    worst = max(errors, key=lambda g: errors[g])
    run.metrics[f"{name}_product_error"] = errors[worst]
    size = f"{cfg['check_n']}x{cfg['check_n']}"
    run.add_check(
        f"{name}_product",
        "correctness",
        Verdict(
            PASS if errors[worst] <= tolerance else FAIL,
            f"{size} {name} product vs float64 on {len(errors)} device(s): worst relative error "
            f"{errors[worst]:.1e} on {worst} (tolerance {tolerance:.0e})",
        ),
    )


def _not_supported(run: Run, name: str, minimum: tuple[int, int]) -> str | None:
    if run.has_gpu and (run.compute_capability or (0, 0)) < minimum:
        return (
            f"{name} tensor cores need compute capability {minimum[0]}.{minimum[1]}; "
            f"this GPU has {run.compute_capability}"
        )
    if name == "tf32" and not run.has_gpu:
        return "TF32 is a GPU tensor-core mode: no GPU"
    return None


def _peak_floor(run: Run, name: str, peaks: dict[str, float]) -> tuple[float | None, Floor | None]:
    """The peak and the fraction floor for ``name``: gpufleet.floors.derived for this host, else
    thresholds.toml's gemm_<p>_fraction_min where a peak was given for a model floors lack."""
    peak = peaks.get(name)
    floor = run.floor(f"gemm.fraction_of_peak.{name}")
    key = f"gemm_{name}_fraction_min"
    legacy = run.threshold(key)  # recorded in config["thresholds"] whichever decides
    if (floor is None or floor.value is None) and peak is not None and legacy > 0:
        floor = Floor(
            f"gemm.fraction_of_peak.{name}",
            legacy,
            "fraction",
            f"thresholds.toml {key} (no matrix floor: {run.floors_reason})",
            per_gpu=True,
            outlier=OUTLIER_BELOW_MEDIAN,
        )
    return peak, floor


def _precision(run: Run, name: str, cfg: dict[str, Any], peaks: dict[str, float]) -> None:
    _, tf32, _, tolerance = PRECISIONS[name]
    run.tf.config.experimental.enable_tensor_float_32_execution(tf32)
    _product_check(run, name, cfg, tolerance)
    peak, floor = _peak_floor(run, name, peaks)
    # Another job's GPU is not loaded (and its figure would be that job's noise).
    window: list[float] = []
    reps = _sustained(run, name, cfg, window) if run.busy is None else {}
    summary = summarize(reps, 2.0 * cfg["n"] ** 3 * cfg["chain"], cfg["sustain_s"])
    tflops = {g: s["sustained_tflops"] for g, s in summary.items()}
    run.measurements[f"{name}_per_gpu"] = summary
    for gpu, entry in sorted(summary.items()):
        run.step(
            f"{name}_sustained",
            f"GPU {gpu}: {entry['sustained_tflops']:.2f} TFLOP/s sustained, "
            f"{entry['initial_tflops']:.2f} initial, {entry['repetitions']} repetitions",
        )
    if tflops:
        run.metrics[f"tflops.{name}"] = tflops
        run.metrics[f"{name}_tflops"] = min(tflops.values())
        if peak:
            fractions = {g: round(v / peak, 4) for g, v in tflops.items()}
            run.metrics[f"fraction_of_peak.{name}"] = fractions
            run.metrics[f"{name}_fraction_of_peak"] = min(fractions.values())
    # The window's readings only: warm-up (tracing, cuBLAS heuristics) idles the GPUs.
    opened, closed = (window[0], window[-1]) if len(window) == 2 else (0.0, float("inf"))
    samples = run.sampler.samples() if run.sampler else []
    telemetry = phase_telemetry([s for s in samples if opened <= s.time_s <= closed], name)
    verdicts = judge(
        name,
        tflops,
        peak,
        floor,
        skip=run.speed_not_applicable,
        busy=run.busy,
        note=throttle_note(telemetry),
    )
    for check, verdict in (
        (f"{name}_fraction_of_peak", verdicts.floor),
        (f"{name}_outliers", verdicts.outliers),
    ):
        run.add_check(check, "speed", verdict)
        # Not "evidence": these are judged in this process over a sustained window, so no
        # extra processes are run for them (validation.verdicts.processes.speed_at_stake).
        run.checks[-1]["telemetry"] = telemetry
        run.checks[-1]["per_gpu"] = summary


def body(run: Run) -> None:
    tf = run.tf
    cfg = run.sizes(QUICK, QUICK_GPU, FULL_GPU)
    peaks, source = matrix_peaks(run.gpu_model) if run.has_gpu else ({}, NO_GPU)
    given = parse_peaks(run.args.peak_tflops)
    if given:
        peaks, source = {**peaks, **given}, "--peak-tflops / GPUFLEET_PEAK_TFLOPS"
    if run.sampler is not None:
        run.sampler.telemetry = True
    run.config.update(
        devices=run.compute_devices,
        peak_tflops=peaks,
        peak_source=source,
        flops_per_repetition=2 * cfg["n"] ** 3 * cfg["chain"],
    )
    tf32_default = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        for name, (_, _, minimum, _) in PRECISIONS.items():
            reason = _not_supported(run, name, minimum)
            if reason is not None:
                run.add_check(f"{name}_product", "correctness", not_applicable(reason))
                skip = reason if run.has_gpu else NO_GPU
                run.add_check(f"{name}_fraction_of_peak", "speed", not_applicable(skip))
                continue
            _precision(run, name, cfg, peaks)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32_default)


if __name__ == "__main__":
    raise SystemExit(
        main(
            "gemm",
            body,
            description=__doc__.splitlines()[0],
            # Without a GPU: two logical CPU devices, so CI runs the all-at-once threads too.
            logical_cpus=2,
            add_arguments=_arguments,
        )
    )
