"""NVIDIA's own diagnostics on a host: DCGM and nccl-tests runs, NCCL reference and transport."""
