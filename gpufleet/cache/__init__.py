"""The fleet cache: one host (group ``gpufleet_cache``) the other hosts download through."""

from gpufleet.cache.derive import (
    APT_PORT,
    GROUP,
    PIP_PORT,
    CacheRef,
    cache_ref,
    client_values,
)

__all__ = ["APT_PORT", "GROUP", "PIP_PORT", "CacheRef", "cache_ref", "client_values"]
