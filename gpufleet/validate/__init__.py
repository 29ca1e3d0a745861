"""The `gpufleet validate` runner: hosts, expectations, SSH config, results and baselines."""
