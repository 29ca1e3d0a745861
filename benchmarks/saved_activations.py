"""Bytes a reference training step keeps for its backward pass, per sample, from its traced graph.

    PYTHONPATH=$PWD nice -n 19 .venv/bin/python benchmarks/saved_activations.py
    ... benchmarks/saved_activations.py --step bert_large --precision amp --batch 8

The source of validation.workloads._batch.ACTIVATION_MIB's XLA-off rows (issue 32 item 5,
review 2 N7). On CPU, no GPU needed: the step is traced (tf.function, XLA off), not run. A
tensor counts as kept when an op of the gradient tape reads it and an op of the forward pass
made it (constants, variable reads and the inputs left out). Each step is traced at two
batches: the difference over the batches is the memory per sample (it grows linearly with the
batch), the rest is fixed per step (AMP's float16 copies of the weights, 0.7 GB for BERT). It is
the XLA-off step's static set: grappler's swapping or the allocator's reuse may hold less, XLA's
fusions hold less (their element-wise intermediates are never written). Unverified on a GPU:
validation.workloads.probe measures the peak there. Review 2 §2.2 traced ResNet-50 the same way
(21.7 GB float, 16.5 GB AMP at batch 256); this script reproduces those figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEPS = ("resnet50", "bert_large")
# Small batches (traced at this and twice this): a trace holds the BERT-Large variables (366 M)
# and LAMB's slots in well under 8 GB of host memory.
BATCH = {"resnet50": 16, "bert_large": 4}
_SKIPPED = ("Const", "ReadVariableOp", "Placeholder", "VarHandleOp")


def _backward(ops: list[Any]) -> set[str]:
    """Every op downstream of the gradient tape's first ops: the backward pass and the update."""
    seen: set[str] = set()
    stack = [op for op in ops if op.name.startswith("gradient_tape/")]
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(c for out in op.outputs for c in out.consumers() if c.name not in seen)
    return seen


def kept_bytes(tf: Any, graph: Any) -> tuple[int, int]:
    """(bytes, tensors) of the forward tensors that backward ops read, in ``graph``."""
    ops = graph.get_operations()
    backward = _backward(ops)
    kept: dict[str, int] = {}
    for op in ops:
        if op.name not in backward:
            continue
        for tensor in op.inputs:
            if tensor.op.name in backward or tensor.op.type in _SKIPPED:
                continue
            count = tensor.shape.num_elements()
            if count:
                kept[tensor.name] = count * tf.as_dtype(tensor.dtype).base_dtype.size
    return sum(kept.values()), len(kept)


def _kept(tf: Any, step_name: str, precision: str, batch: int) -> tuple[int, int, int]:
    from validation.workloads._refsteps import BERT_LARGE, RESNET50_GPU, build_step

    cfg = RESNET50_GPU if step_name == "resnet50" else BERT_LARGE
    step = build_step(tf, step_name, cfg, precision, batch=batch, jit_compile=False, seed=0)
    kept, tensors = kept_bytes(tf, step.step.get_concrete_function().graph)
    return kept, tensors, sum(int(v.shape.num_elements()) for v in step.model.trainable_variables)


def measure(step_name: str, precision: str, batch: int) -> dict[str, Any]:
    """Two traces (``batch`` and twice it): kept MiB per sample and fixed per step."""
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    started = time.monotonic()
    small, tensors, params = _kept(tf, step_name, precision, batch)
    large, _, _ = _kept(tf, step_name, precision, 2 * batch)
    per_sample = (large - small) / batch
    return {
        "step": step_name,
        "precision": precision,
        "batches": [batch, 2 * batch],
        "kept_mib_per_sample": round(per_sample / 2**20, 2),
        "kept_mib_fixed": round((small - batch * per_sample) / 2**20, 1),
        "tensors": tensors,
        "parameters": params,
        "trace_s": round(time.monotonic() - started, 1),
        "tensorflow": tf.__version__,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", choices=(*STEPS, "all"), default="all")
    parser.add_argument("--precision", choices=("fp32", "amp", "bf16", "all"), default="all")
    parser.add_argument(
        "--batch", type=int, default=None, help="default: 16 ResNet, 4 BERT (and twice it)"
    )
    args = parser.parse_args()
    steps = STEPS if args.step == "all" else (args.step,)
    precisions = ("fp32", "amp") if args.precision == "all" else (args.precision,)
    for name in steps:
        for precision in precisions:
            print(json.dumps(measure(name, precision, args.batch or BATCH[name])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
