"""The workload tier: the on-host TensorFlow workloads run on the CPU."""
