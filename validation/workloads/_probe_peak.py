"""The probe's memory part: peak device memory of one XLA-off ResNet-50 step (review 2 §7, N7).

Run by validation.workloads.probe in a process of its own:
``python -m validation.workloads._probe_peak --precision amp --batch 256 --json PATH``.
It writes {"precision", "batch", "xla", "device", "peak_mib", "oom", "error", "estimate_mib",
"memory_total_mib"}: the measured peak (tf.config.experimental.get_memory_info) beside the
estimate that validation.workloads._batch chooses batches by, or that the step ran out of memory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m validation.workloads._probe_peak")
    parser.add_argument("--precision", choices=("fp32", "tf32", "amp", "bf16"), default="amp")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke: tiny ResNet widths")
    parser.add_argument("--json", required=True, metavar="PATH")
    return parser


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Two steps of the XLA-off ResNet-50 at ``args.batch``; the allocator's peak after them."""
    import tensorflow as tf

    from validation.workloads._batch import needed_mib
    from validation.workloads._refsteps import RESNET50_CPU, RESNET50_GPU, build_step

    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/device:CPU:0"
    out: dict[str, Any] = {
        "precision": args.precision,
        "batch": args.batch,
        "xla": False,
        "device": device,
        "estimate_mib": needed_mib("resnet50", args.precision, args.batch, xla=False),
        "peak_mib": None,
        "oom": False,
        "error": None,
    }
    arch = RESNET50_CPU if args.tiny or not gpus else RESNET50_GPU
    name = device.replace("/device:", "")
    try:
        with tf.device(device):
            step = build_step(
                tf, "resnet50", arch, args.precision, batch=args.batch, jit_compile=False, seed=0
            )
            step.block(1)()  # trace and allocate outside the measurement
            if gpus:
                tf.config.experimental.reset_memory_stats(name)
            step.block(1)()
            if gpus:
                out["peak_mib"] = tf.config.experimental.get_memory_info(name)["peak"] / 2**20
    except tf.errors.ResourceExhaustedError as exc:
        out["oom"], out["error"] = True, str(exc).splitlines()[0][:300]
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    Path(args.json).write_text(json.dumps(measure(args), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
