"""gpufleet's tests: unit, operations, workloads (TensorFlow on the CPU) and integration tiers."""
