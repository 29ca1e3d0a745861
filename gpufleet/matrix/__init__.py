"""The version matrix: which TF, Python, CUDA, cuDNN, NCCL and driver go together, per GPU.

Tables: ``tf_releases``, ``drivers``, ``gpus``, ``apt_names``; rules: ``checks``; the resolver:
``resolve``. Example: ``from gpufleet.matrix import resolve``.
"""

from gpufleet.matrix.resolve import (
    CUDA_MIN_DRIVER,
    DEFAULT_DRIVER_BRANCH,
    DRIVER_BRANCHES,
    GPUS,
    KERNEL_MODULE_FLAVORS,
    MINOR_VERSION_COMPAT_MIN_DRIVER,
    NVIDIA_REPO_ARCHES,
    NVIDIA_REPO_DISTROS,
    NVIDIA_REPO_KEY_FILE,
    TF_RELEASES,
    DriverBranch,
    GpuModel,
    MatrixError,
    Resolution,
    TFRelease,
    constraints_file,
    gpu_by_device_id,
    nvidia_repo_arch,
    nvidia_repo_distro,
    resolve,
    unknown_tf_message,
)

__all__ = [
    "CUDA_MIN_DRIVER",
    "DEFAULT_DRIVER_BRANCH",
    "DRIVER_BRANCHES",
    "GPUS",
    "KERNEL_MODULE_FLAVORS",
    "MINOR_VERSION_COMPAT_MIN_DRIVER",
    "NVIDIA_REPO_ARCHES",
    "NVIDIA_REPO_DISTROS",
    "NVIDIA_REPO_KEY_FILE",
    "TF_RELEASES",
    "DriverBranch",
    "GpuModel",
    "MatrixError",
    "Resolution",
    "TFRelease",
    "constraints_file",
    "gpu_by_device_id",
    "nvidia_repo_arch",
    "nvidia_repo_distro",
    "resolve",
    "unknown_tf_message",
]
