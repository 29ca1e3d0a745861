"""Reference training steps whose healthy per-GPU figures are published: ResNet-50 and BERT.

The GPU sizes are the ones NVIDIA DeepLearningExamples (DLE) measured, so a figure can be held
against gpufleet.floors.references: ResNet-50 v1.5 (NHWC, 224x224, 1000 classes, the stride in
the 3x3 convolution) and a BERT-Large-shaped encoder (24 layers, hidden 1024, 16 heads, sequence
128, 20 masked predictions, LAMB). CPU runs use tiny widths of the same architectures: they
prove the steps train, not their speed.

Example:
    >>> step = build_step(tf, "resnet50", RESNET50_CPU, "fp32", batch=4, jit_compile=False, seed=0)
    >>> block = step.block(3)   # runs 3 steps, then waits for the device; returns the last loss
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufleet.floors import references as refs
from validation.workloads.xla_cache import keyed

# Architecture sizes. "cpu": tiny (CI); "gpu": what DLE measured.
RESNET50_CPU: dict[str, Any] = {"image": 32, "classes": 10, "blocks": (1, 1, 1, 1), "width": 8}
RESNET50_GPU: dict[str, Any] = {"image": 224, "classes": 1000, "blocks": (3, 4, 6, 3), "width": 64}
BERT_CPU: dict[str, Any] = {
    "vocab": 512,
    "hidden": 32,
    "layers": 2,
    "heads": 2,
    "intermediate": 64,
    "sequence": 16,
    "predictions": 3,
}
# BERT-Large at DLE's phase-1 pre-training sequence length (128, 20 masked positions).
BERT_LARGE: dict[str, Any] = {
    "vocab": 30522,
    "hidden": 1024,
    "layers": 24,
    "heads": 16,
    "intermediate": 4096,
    "sequence": 128,
    "predictions": 20,
}
FIGURES = {"resnet50": "resnet50.images_per_s", "bert_large": "bert_large.sequences_per_s"}
# Per-GPU batch where DLE publishes none for the model (its V100 16GB batches: they fit every
# GPU of 16 GB and more); a published row's batch wins (gpufleet.floors.references).
DEFAULT_BATCH = {
    ("resnet50", "amp"): 256,
    ("resnet50", "fp32"): 128,
    ("resnet50", "tf32"): 128,
    ("bert_large", "amp"): 48,
    ("bert_large", "fp32"): 24,
    ("bert_large", "tf32"): 24,
}
POLICY = {"fp32": "float32", "tf32": "float32", "amp": "mixed_float16", "bf16": "mixed_bfloat16"}


def float_precision(compute_capability: tuple[int, int] | None) -> str:
    """What TensorFlow's float32 runs as: TF32 from compute capability 8.0 (its default)."""
    return "tf32" if compute_capability is not None and compute_capability >= (8, 0) else "fp32"


def batch_per_gpu(step: str, precision: str, gpu_model: str | None) -> int:
    """The per-GPU batch DLE used for this model and precision, else gpufleet's default."""
    if gpu_model:
        ref = refs.published(gpu_model, f"{FIGURES[step]}.{precision}")
        if ref is not None and ref.batch_per_gpu:
            return ref.batch_per_gpu
    return DEFAULT_BATCH[(step, "amp" if precision in ("amp", "bf16") else precision)]


def bert_parameters(cfg: dict[str, Any]) -> int:
    """Trainable parameters of bert_encoder(cfg): embeddings, encoder layers, masked-LM head."""
    h, i, v, s = cfg["hidden"], cfg["intermediate"], cfg["vocab"], cfg["sequence"]
    embeddings = (v + s + 2) * h + 2 * h
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h
    head = (h * h + h) + 2 * h + (h * v + v)
    return embeddings + cfg["layers"] * layer + head


def _bottleneck(layers: Any, x: Any, filters: int, stride: int, dtype: str) -> Any:
    """ResNet v1.5 bottleneck: 1x1, 3x3 (strided), 1x1 x4; a projection when the shape changes."""
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * filters:
        shortcut = layers.Conv2D(4 * filters, 1, stride, use_bias=False, dtype=dtype)(x)
        shortcut = layers.BatchNormalization(dtype=dtype)(shortcut)
    for size, out, step in ((1, filters, 1), (3, filters, stride), (1, 4 * filters, 1)):
        x = layers.Conv2D(out, size, step, padding="same", use_bias=False, dtype=dtype)(x)
        x = layers.BatchNormalization(dtype=dtype)(x)
        if out == filters:
            x = layers.ReLU(dtype=dtype)(x)
    return layers.ReLU(dtype=dtype)(layers.Add(dtype=dtype)([x, shortcut]))


def resnet50(keras: Any, cfg: dict[str, Any], dtype: str = "float32", seed: int = 0) -> Any:
    """ResNet-50 v1.5 (NHWC) with ``cfg``'s widths; the logits layer stays float32."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    inputs = keras.Input((cfg["image"], cfg["image"], 3))
    x = layers.Conv2D(cfg["width"], 7, 2, padding="same", use_bias=False, dtype=dtype)(inputs)
    x = layers.ReLU(dtype=dtype)(layers.BatchNormalization(dtype=dtype)(x))
    x = layers.MaxPooling2D(3, 2, padding="same", dtype=dtype)(x)
    for stage, count in enumerate(cfg["blocks"]):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            x = _bottleneck(layers, x, cfg["width"] * 2**stage, stride, dtype)
    x = layers.GlobalAveragePooling2D(dtype=dtype)(x)
    return keras.Model(inputs, layers.Dense(cfg["classes"], dtype="float32")(x))


def bert_encoder(keras: Any, cfg: dict[str, Any], dtype: str = "float32", seed: int = 0) -> Any:
    """A post-LN BERT encoder with a masked-LM head on ``predictions`` positions per sequence.

    Inputs: token ids, segment ids, positions (all [batch, sequence]) and the masked
    positions [batch, predictions]; output: float32 vocabulary logits at those positions.
    """
    keras.utils.set_random_seed(seed)
    layers, ops = keras.layers, keras.ops
    h, s = cfg["hidden"], cfg["sequence"]
    tokens = keras.Input((s,), dtype="int32")
    segments = keras.Input((s,), dtype="int32")
    positions = keras.Input((s,), dtype="int32")
    masked = keras.Input((cfg["predictions"],), dtype="int32")
    x = layers.Add(dtype=dtype)(
        [
            layers.Embedding(cfg["vocab"], h, dtype=dtype)(tokens),
            layers.Embedding(s, h, dtype=dtype)(positions),
            layers.Embedding(2, h, dtype=dtype)(segments),
        ]
    )
    x = layers.Dropout(0.1)(layers.LayerNormalization(epsilon=1e-12, dtype=dtype)(x))
    for _ in range(cfg["layers"]):
        attention = layers.MultiHeadAttention(cfg["heads"], h // cfg["heads"], dtype=dtype)(x, x)
        x = layers.LayerNormalization(epsilon=1e-12, dtype=dtype)(
            layers.Add(dtype=dtype)([x, layers.Dropout(0.1)(attention)])
        )
        inner = layers.Dense(cfg["intermediate"], activation="gelu", dtype=dtype)(x)
        outer = layers.Dropout(0.1)(layers.Dense(h, dtype=dtype)(inner))
        x = layers.LayerNormalization(epsilon=1e-12, dtype=dtype)(
            layers.Add(dtype=dtype)([x, outer])
        )
    picked = ops.take_along_axis(x, ops.expand_dims(masked, -1), axis=1)
    picked = layers.Dense(h, activation="gelu", dtype=dtype)(picked)
    picked = layers.LayerNormalization(epsilon=1e-12, dtype=dtype)(picked)
    logits = layers.Dense(cfg["vocab"], dtype="float32")(picked)
    return keras.Model([tokens, segments, positions, masked], logits)


@dataclass
class ReferenceStep:
    """A compiled training step on fixed synthetic data; ``block(n)`` runs n steps and syncs."""

    name: str
    precision: str
    batch: int
    model: Any
    step: Callable[[], Any]
    sync: Callable[[], float]
    jit_compile: bool

    def block(self, steps: int) -> Callable[[], float]:
        """A callable running ``steps`` steps and returning once the device has finished them
        (sync_devices, else a scalar read from the updated variables), with the last loss."""

        def run() -> float:
            loss: Any = None
            for _ in range(steps):
                loss = self.step()
            self.sync()
            return float(loss)

        return run


def device_sync(tf: Any, variables: list[Any]) -> Callable[[], float]:
    """Wait for every queued kernel: tf.test.experimental.sync_devices() (TF >= 2.13), else a
    scalar that depends on the first and last updated variables (the optimizer's last writes)."""
    sync_devices = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)

    def read() -> float:
        if sync_devices is not None:
            sync_devices()
            return 0.0
        ends = [variables[0], variables[-1]]
        return float(tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in ends]))

    return read


def synthetic_batch(tf: Any, name: str, cfg: dict[str, Any], batch: int, seed: int) -> tuple:
    """Fixed synthetic inputs and labels, created where the caller's tf.device places them
    (images as uint8, cast in the step, as a decoded JPEG batch arrives)."""
    rng = np.random.default_rng(seed)
    if name == "resnet50":
        images = rng.integers(0, 256, (batch, cfg["image"], cfg["image"], 3), np.uint8)
        labels = rng.integers(0, cfg["classes"], (batch,)).astype(np.int32)
        return (tf.constant(images),), tf.constant(labels)
    s, p = cfg["sequence"], cfg["predictions"]
    tokens = rng.integers(0, cfg["vocab"], (batch, s)).astype(np.int32)
    segments = (np.arange(s)[None, :] >= s // 2).astype(np.int32).repeat(batch, 0)
    positions = np.arange(s, dtype=np.int32)[None, :].repeat(batch, 0)
    masked = np.sort(rng.permutation(s)[:p]).astype(np.int32)[None, :].repeat(batch, 0)
    labels = rng.integers(0, cfg["vocab"], (batch, p)).astype(np.int32)
    inputs = tuple(tf.constant(a) for a in (tokens, segments, positions, masked))
    return inputs, tf.constant(labels)


def build_model(keras: Any, name: str, cfg: dict[str, Any], precision: str, seed: int) -> Any:
    builder = resnet50 if name == "resnet50" else bert_encoder
    return builder(keras, cfg, POLICY[precision], seed)


def optimizer_for(keras: Any, name: str, precision: str) -> Any:
    """DLE's optimizers: SGD with momentum (ResNet-50), LAMB (BERT); fp16 scales the loss."""
    if name == "resnet50":
        optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    else:
        optimizer = keras.optimizers.Lamb(1e-4)
    if precision == "amp":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def replica_loss(tf: Any, keras: Any, name: str, model: Any, inputs: tuple, labels: Any) -> Any:
    """Mean softmax cross-entropy in float32 (per example for the caller to average)."""
    x = tf.cast(inputs[0], tf.float32) / 255.0 if name == "resnet50" else list(inputs)
    logits = model(x, training=True)
    losses = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return losses if name == "resnet50" else tf.reduce_mean(losses, axis=-1)


def build_step(
    tf: Any,
    name: str,
    cfg: dict[str, Any],
    precision: str,
    *,
    batch: int,
    jit_compile: bool,
    seed: int,
) -> ReferenceStep:
    """Model, optimizer, data and one compiled training step for ``name`` at ``precision``.

    Call it inside the tf.device scope the step should run on. TF32 is TensorFlow's default
    for float32 on compute capability >= 8.0; "fp32" and "tf32" build the same step."""
    keras = tf.keras
    model = build_model(keras, name, cfg, precision, seed)
    optimizer = optimizer_for(keras, name, precision)
    optimizer.build(model.trainable_variables)
    inputs, labels = synthetic_batch(tf, name, cfg, batch, seed)
    scale = precision == "amp"

    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(replica_loss(tf, keras, name, model, inputs, labels))
            scaled = optimizer.scale_loss(loss) if scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    compiled = keyed(tf.function(step, jit_compile=jit_compile), jit_compile)  # a stable key
    sync = device_sync(tf, model.trainable_variables)
    return ReferenceStep(name, precision, batch, model, compiled, sync, jit_compile)
