"""GEMM: matmul throughput for FP32, TF32, FP16 and BF16 as a fraction of the datasheet peak.

Run: ``python -m validation.workloads.gemm [--quick] [--peak-tflops fp32=67,tf32=494,...]``

The datasheet peaks (dense TFLOP/s) come from gpufleet.matrix on the control node, which is
not importable on the host: `gpufleet validate` passes them with --peak-tflops (or the
GPUFLEET_PEAK_TFLOPS environment variable, same format). Without a peak for a precision its
throughput is measured and reported and its verdict is not_applicable. Precisions follow the
tensor cores: FP16 from compute capability 7.0, TF32 and BF16 from 8.0 (DESIGN.md). Every
precision also multiplies a small matrix and compares it with numpy's float64 product.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from validation.harness import FAIL, PASS, Verdict
from validation.workloads._common import NO_GPU, Run, WorkloadError, main, not_applicable

QUICK: dict[str, Any] = {"n": 256, "chain": 4, "repetitions": 3, "check_n": 128}
QUICK_GPU: dict[str, Any] = {"n": 4096, "chain": 10, "repetitions": 8, "check_n": 256}
FULL_GPU: dict[str, Any] = {"n": 8192, "chain": 20, "repetitions": 12, "check_n": 256}
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
        help="datasheet dense peaks in TFLOP/s (from gpufleet.matrix)",
    )


def _chain(tf: Any, chain: int) -> Any:
    """c <- c @ b, ``chain`` times: each matmul depends on the last, so none is elided."""

    @tf.function
    def run(c: Any, b: Any) -> Any:
        for _ in range(chain):
            c = tf.linalg.matmul(c, b)
        return c[0, 0]

    return run


def _measure(run: Run, name: str, cfg: dict[str, Any], device: str) -> list[float]:
    """TFLOP/s of each repetition for one precision on ``device``."""
    tf = run.tf
    dtype = getattr(tf, PRECISIONS[name][0])
    n, chain = cfg["n"], cfg["chain"]
    rng = np.random.default_rng(run.args.seed)
    with tf.device(device):
        # b scaled by 1/sqrt(n) keeps the chained product's magnitude steady (no fp16 overflow).
        c = tf.cast(tf.constant(rng.standard_normal((n, n)), tf.float32), dtype)
        b = tf.cast(tf.constant(rng.standard_normal((n, n)) / np.sqrt(n), tf.float32), dtype)
        step = _chain(tf, chain)
        float(step(c, b))  # warm-up: tracing, cuBLAS heuristics
        tflops = []
        for index in range(cfg["repetitions"]):
            with run.phase(name):
                start = time.perf_counter()
                float(step(c, b))
                seconds = time.perf_counter() - start
            tflops.append(2.0 * n**3 * chain / seconds / 1e12)
            run.step(f"{name}_rep{index}", f"{seconds:.4f}s {tflops[-1]:.2f} TFLOP/s", device)
    return tflops


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


def body(run: Run) -> None:
    tf = run.tf
    cfg = run.sizes(QUICK, QUICK_GPU, FULL_GPU)
    peaks = parse_peaks(run.args.peak_tflops)
    device = run.compute_devices[0]
    run.config.update(
        device=device, peak_tflops=peaks, flops_per_repetition=2 * cfg["n"] ** 3 * cfg["chain"]
    )
    tf32_default = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        for name, (_, tf32, minimum, tolerance) in PRECISIONS.items():
            if run.has_gpu and (run.compute_capability or (0, 0)) < minimum:
                reason = (
                    f"{name} tensor cores need compute capability "
                    f"{minimum[0]}.{minimum[1]}; this GPU has {run.compute_capability}"
                )
                run.add_check(f"{name}_product", "correctness", not_applicable(reason))
                run.add_check(f"{name}_fraction_of_peak", "speed", not_applicable(reason))
                continue
            if name == "tf32" and not run.has_gpu:
                reason = "TF32 is a GPU tensor-core mode: no GPU"
                run.add_check(f"{name}_product", "correctness", not_applicable(reason))
                run.add_check(f"{name}_fraction_of_peak", "speed", not_applicable(NO_GPU))
                continue
            tf.config.experimental.enable_tensor_float_32_execution(tf32)
            error = _product_error(run, name, cfg["check_n"], device)
            run.metrics[f"{name}_product_error"] = error
            run.add_check(
                f"{name}_product",
                "correctness",
                Verdict(
                    PASS if error <= tolerance else FAIL,
                    f"{cfg['check_n']}x{cfg['check_n']} {name} product vs float64: relative error "
                    f"{error:.1e} (tolerance {tolerance:.0e})",
                ),
            )
            tflops = _measure(run, name, cfg, device)
            run.measurements[f"{name}_tflops"] = tflops
            run.metrics[f"{name}_tflops"] = float(np.median(tflops))
            skip = run.speed_not_applicable
            peak = peaks.get(name)
            if skip is None and peak is None:
                skip = f"no datasheet peak for {name}: pass --peak-tflops {name}=TFLOPS"
            threshold = run.threshold(f"gemm_{name}_fraction_min")
            if skip is None and threshold <= 0:
                skip = f"gemm_{name}_fraction_min is 0 (not asserted)"
            fractions = [t / peak for t in tflops] if peak else tflops
            run.sample_check(
                f"{name}_fraction_of_peak",
                f"{name}_fraction_of_peak" if peak else None,
                fractions,
                threshold=threshold,
                what=f"{name} fraction of peak",
                not_applicable=skip,
            )
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32_default)


if __name__ == "__main__":
    raise SystemExit(
        main("gemm", body, description=__doc__.splitlines()[0], add_arguments=_arguments)
    )
