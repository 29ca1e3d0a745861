"""Templates of the periodic checks' systemd units (gpufleet.stages.monitoring renders them)."""
