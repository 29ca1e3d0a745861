"""The unit tier: pure and planned behaviour, no root, no sandbox, no TensorFlow run."""
