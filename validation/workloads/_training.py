"""Small Keras models, synthetic data and compiled training steps shared by the workloads.

Example:
    >>> model = mlp(keras, inputs=64, width=256, depth=3, outputs=10)
    >>> step = train_step(tf, model, keras.optimizers.SGD(0.01), jit_compile=False)
    >>> loss = step(x, y)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from validation.workloads.xla_cache import keyed


def synthetic_data(
    batch: int, inputs: int, outputs: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Fixed regression data: the same seed gives the same arrays on every host."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, inputs)).astype(np.float32)
    y = rng.standard_normal((batch, outputs)).astype(np.float32)
    return x, y


def mlp(
    keras: Any,
    *,
    inputs: int,
    width: int,
    depth: int,
    outputs: int,
    dtype: str = "float32",
    activation: str = "relu",
    layer_norm: bool = False,
    seed: int = 0,
) -> Any:
    """A dense network; hidden layers in ``dtype`` (a Keras dtype policy), output kept float32.

    The output layer stays float32 as the TensorFlow mixed precision guide asks, so the loss
    is computed in full precision whatever the policy.
    """
    keras.utils.set_random_seed(seed)
    layers: list[Any] = [keras.Input((inputs,))]
    for _ in range(depth):
        layers.append(keras.layers.Dense(width, activation=activation, dtype=dtype))
        if layer_norm:
            layers.append(keras.layers.LayerNormalization(dtype=dtype))
    layers.append(keras.layers.Dense(outputs, dtype="float32"))
    return keras.Sequential(layers)


def mse(tf: Any, prediction: Any, target: Any) -> Any:
    """Mean squared error in float32."""
    return tf.reduce_mean(tf.square(tf.cast(prediction, tf.float32) - target))


def train_step(
    tf: Any, model: Any, optimizer: Any, *, jit_compile: bool, loss_scale: bool = False
) -> Any:
    """A compiled (tf.function) SGD step returning the loss; XLA only when ``jit_compile``
    (then traced at a uid mark, validation.workloads.xla_cache.keyed: a stable persistent-cache
    key).

    ``loss_scale`` for a keras.optimizers.LossScaleOptimizer (float16): the loss is scaled
    before the gradient and the optimizer unscales and skips non-finite steps.
    """
    optimizer.build(model.trainable_variables)

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = mse(tf, model(x, training=True), y)
            scaled = optimizer.scale_loss(loss) if loss_scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    return keyed(tf.function(step, jit_compile=jit_compile), jit_compile)


def repeat_steps(
    step: Callable[..., Any], args: tuple[Any, ...], steps: int
) -> Callable[[], float]:
    """A callable running ``steps`` steps and blocking until the last loss is on the host."""

    def run() -> float:
        loss: Any = None
        for _ in range(steps):
            loss = step(*args)
        return float(loss)  # reading the value waits for the device to finish

    return run


def relative_difference(a: float, b: float) -> float:
    """|a - b| / max(|b|, tiny): how far ``a`` is from the reference ``b``."""
    return abs(a - b) / max(abs(b), 1e-12)
