"""The fleet cache: one host (group ``gpufleet_cache``) the other hosts download through."""
