"""The version matrix: which TF, Python, CUDA, cuDNN, NCCL and driver go together, per GPU.

Tables: ``tf_releases``, ``drivers``, ``gpus``, ``apt_names``; rules: ``checks``; the resolver:
``resolver``. This package re-exports the resolver's names, e.g.
``from gpufleet.matrix import resolve``.
"""

from gpufleet.matrix import resolver
from gpufleet.matrix.resolver import *  # noqa: F403  (the names listed in resolver.__all__)

__all__ = resolver.__all__
