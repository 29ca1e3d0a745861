"""One worker of the cluster tier's job: MultiWorkerMirroredStrategy, a custom training loop.

    TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:23456", "10.0.0.2:23456"]},
                "task": {"type": "worker", "index": 0}}' \\
        python -m validation.cluster.worker --steps 300 --global-batch 96

Without TF_CONFIG it is the single-host reference run on the same global batches. It prints
one JSON document: its final loss, a digest and the values of its final weights, and its speed.
The strategy is built before any other TensorFlow call (TF_CONFIG is read then, tensorflow#60706).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpufleet.compat import zip_strict
from validation.cluster.steps import DEFAULT_STEP, STEPS, global_batches

IMPLEMENTATIONS = ("auto", "ring", "nccl")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m validation.cluster.worker")
    parser.add_argument("--step", choices=sorted(STEPS), default=DEFAULT_STEP)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument(
        "--implementation",
        choices=IMPLEMENTATIONS,
        default="auto",
        help="collective implementation; auto: NCCL with GPUs, RING on CPU",
    )
    return parser


def make_strategy(tf: Any, implementation: str, has_gpu: bool) -> tuple[Any, str]:
    """The strategy and the implementation chosen (NCCL only all-reduces on GPUs)."""
    kinds = tf.distribute.experimental.CommunicationImplementation
    chosen = implementation if implementation != "auto" else ("nccl" if has_gpu else "ring")
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=kinds.NCCL if chosen == "nccl" else kinds.RING
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options), chosen


def train(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    # Physical devices can be listed before the strategy without initialising the runtime.
    has_gpu = bool(tf.config.list_physical_devices("GPU"))
    strategy, implementation = make_strategy(tf, args.implementation, has_gpu)
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    replicas = strategy.num_replicas_in_sync
    if args.global_batch % replicas:
        raise SystemExit(
            f"--global-batch {args.global_batch} does not split over {replicas} replicas"
        )
    per_replica = args.global_batch // replicas
    x, y = global_batches(args.steps, args.global_batch, args.seed)
    variables, loss_and_grads = STEPS[args.step](tf, strategy, args.global_batch, args.seed)
    lr = args.learning_rate
    total = tf.distribute.ReduceOp.SUM

    @tf.function
    def train_step(xs: Any, ys: Any) -> Any:
        loss, grads = strategy.run(loss_and_grads, args=(xs, ys))
        grads = strategy.extended.batch_reduce_to(
            total, [(g, v) for g, v in zip_strict(grads, variables)]
        )
        for variable, grad in zip_strict(variables, grads):
            variable.assign_sub(lr * grad)
        return strategy.reduce(total, loss, axis=None)

    def shard(array: np.ndarray, step: int) -> Any:
        def piece(context: Any) -> Any:
            start = context.replica_id_in_sync_group * per_replica
            return tf.constant(array[step, start : start + per_replica])

        return strategy.experimental_distribute_values_from_function(piece)

    losses = []
    started = time.perf_counter()
    for step in range(args.steps):
        if step == 1:  # the first step traces and builds the collectives: not timed
            started = time.perf_counter()
        losses.append(float(train_step(shard(x, step), shard(y, step))))
    elapsed = time.perf_counter() - started
    weights = np.concatenate([np.asarray(v.numpy(), np.float32).ravel() for v in variables])
    return {
        "task_index": int(config.get("task", {}).get("index", 0)),
        "workers": len(config.get("cluster", {}).get("worker", [])) or 1,
        "replicas": replicas,
        "device": "GPU" if has_gpu else "CPU",
        "implementation": implementation,
        "step": args.step,
        "steps": args.steps,
        "global_batch": args.global_batch,
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "weights_sha256": hashlib.sha256(weights.tobytes()).hexdigest(),
        "weights": [float(w) for w in weights],
        "examples_per_s": args.global_batch * max(args.steps - 1, 1) / max(elapsed, 1e-9),
    }


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    if args.steps < 2 or args.global_batch < 1:
        print("--steps must be 2 or more and --global-batch 1 or more", file=sys.stderr)
        return 2
    print(json.dumps(train(args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
