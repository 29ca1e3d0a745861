"""Training steps the cluster job can run, by name, so a reference step can replace the default.

A step is built from the strategy and returns ``(variables, loss_and_grads)``: the variables to
train (created in the strategy's scope) and a function of one replica's batch giving that
replica's share of the global loss and its gradients. The job sums both across workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# Sizes of the default step: small enough for a CPU, large enough that a wrong all-reduce
# shows in every weight (577 parameters).
INPUTS = 16
WIDTH = 32


def global_batches(steps: int, global_batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole job's data, ``steps`` global batches, the same on every host for a seed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, global_batch, INPUTS)).astype(np.float32)
    true_w = rng.standard_normal((INPUTS, 1)).astype(np.float32)
    y = np.tanh(x @ true_w) + 0.1 * rng.standard_normal((steps, global_batch, 1)).astype(np.float32)
    return x, y.astype(np.float32)


def dense_regression(tf: Any, strategy: Any, global_batch: int, seed: int) -> tuple[list, Callable]:
    """A one-hidden-layer regression network in plain TensorFlow variables (no Keras: Keras 3
    breaks MultiWorkerMirroredStrategy training, tensorflow#72388, keras-team/keras#20585)."""
    rng = np.random.default_rng(seed + 1)
    init = [
        (rng.standard_normal((INPUTS, WIDTH)) / np.sqrt(INPUTS)).astype(np.float32),
        np.zeros((WIDTH,), np.float32),
        (rng.standard_normal((WIDTH, 1)) / np.sqrt(WIDTH)).astype(np.float32),
        np.zeros((1,), np.float32),
    ]
    with strategy.scope():
        variables = [tf.Variable(value) for value in init]

    def loss_and_grads(x: Any, y: Any) -> tuple[Any, list]:
        w1, b1, w2, b2 = variables
        with tf.GradientTape() as tape:
            hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
            error = tf.matmul(hidden, w2) + b2 - y
            # This replica's share: divided by the global batch, so the sum over workers is
            # the mean over the global batch, as a single host computes it.
            loss = tf.reduce_sum(tf.square(error)) / global_batch
        return loss, tape.gradient(loss, variables)

    return variables, loss_and_grads


STEPS: dict[str, Callable[..., tuple[list, Callable]]] = {"dense_regression": dense_regression}
DEFAULT_STEP = "dense_regression"
