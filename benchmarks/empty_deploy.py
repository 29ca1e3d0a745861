"""pyinfra's floor: a deploy file with no operations (benchmarks/noop_floor.py runs it with the
same inventory and connection settings as deploy/gpu_node.py, so the difference is gpufleet's)."""
