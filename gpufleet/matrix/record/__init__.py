"""Recorded control fields of NVIDIA's CUDA apt repositories (nvidia_repos.json, SOURCES.md)."""
