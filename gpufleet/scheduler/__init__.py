"""Schedulers gpufleet integrates with: Slurm's drain/resume rule and adapters (stdlib only)."""
