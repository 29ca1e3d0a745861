"""The probe's memory part: peak device memory of one reference step (review 2 §7, N7).

Run by validation.workloads.probe in a process of its own:
``python -m validation.workloads._probe_peak --precision amp --batch 256 --json PATH``
(ResNet-50 without XLA); BERT-Large's estimate by hand on one GPU:
``python -m validation.workloads._probe_peak --step bert_large --xla --precision amp --batch 48``.
It writes {"step", "precision", "batch", "xla", "device", "peak_mib", "oom", "error",
"estimate_mib"}: the measured peak (tf.config.experimental.get_memory_info) beside the estimate
that validation.workloads._batch chooses batches by, or that the step ran out of memory.
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
    parser.add_argument("--step", choices=("resnet50", "bert_large"), default="resnet50")
    parser.add_argument("--xla", action="store_true", help="jit_compile=True (default: off)")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke: tiny widths")
    parser.add_argument("--json", required=True, metavar="PATH")
    return parser


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Two steps of the reference step at ``args.batch``; the allocator's peak after them."""
    import tensorflow as tf

    from validation.workloads._batch import needed_mib
    from validation.workloads._refsteps import (
        BERT_CPU,
        BERT_LARGE,
        RESNET50_CPU,
        RESNET50_GPU,
        build_step,
    )

    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/device:CPU:0"
    xla = bool(args.xla and gpus)
    out: dict[str, Any] = {
        "step": args.step,
        "precision": args.precision,
        "batch": args.batch,
        "xla": xla,
        "device": device,
        "estimate_mib": needed_mib(args.step, args.precision, args.batch, xla=xla),
        "peak_mib": None,
        "oom": False,
        "error": None,
    }
    sizes = {"resnet50": (RESNET50_CPU, RESNET50_GPU), "bert_large": (BERT_CPU, BERT_LARGE)}
    arch = sizes[args.step][0 if args.tiny or not gpus else 1]
    name = device.replace("/device:", "")
    try:
        with tf.device(device):
            step = build_step(
                tf, args.step, arch, args.precision, batch=args.batch, jit_compile=xla, seed=0
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
