"""Review 2 N6: each micro-batch's forward waits for the previous one's gradients.

A GPU runs ready kernels breadth-first, so the order must be in the graph itself, where a CPU
run can see it: the op that reads micro-batch i's slice of the input (i >= 1) must have a
gradient op of micro-batch i-1 among its ancestors (data or control edges).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.workload


def _ancestors(op: Any) -> set[str]:
    seen: set[str] = set()
    stack = [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                stack.append(parent)
    return seen


def test_each_micro_batch_starts_after_the_previous_ones_gradients() -> None:
    import tensorflow as tf

    from validation.workloads._training import mlp
    from validation.workloads.grad_accumulation import _steps

    model = mlp(tf.keras, inputs=8, width=16, depth=2, outputs=4, seed=0)
    optimizer = tf.keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
    _, accumulated = _steps(tf, model, optimizer, 4)
    graph = accumulated.get_concrete_function(
        tf.TensorSpec([16, 8], tf.float32), tf.TensorSpec([16, 4], tf.float32)
    ).graph
    split = next(
        op for op in graph.get_operations() if op.type == "Split" and op.inputs[1].shape[1] == 8
    )
    for index in range(1, 4):
        readers = split.outputs[index].consumers()
        assert readers, f"micro-batch {index} is never read"
        for reader in readers:
            gradients = {n for n in _ancestors(reader) if "gradient" in n.lower() or "_grad" in n}
            assert gradients, f"micro-batch {index}'s forward does not wait for any gradient"
