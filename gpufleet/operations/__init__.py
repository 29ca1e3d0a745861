"""gpufleet's own pyinfra operations: driven by explicit arguments only, never by host.data."""
