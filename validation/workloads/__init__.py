"""The TensorFlow workloads the suite runs in fresh processes, and XLA's compilation cache."""
