"""The version matrix: TF, Python, CUDA, cuDNN, NCCL, driver and apt names, with the resolver."""

from gpufleet.matrix import resolver
from gpufleet.matrix.resolver import *  # noqa: F403  (the names listed in resolver.__all__)

__all__ = resolver.__all__
