"""gpufleet rollout: upgrades through the fleet a few hosts at a time, behind validation gates."""
