"""What NVIDIA's CUDA repositories do not publish for a distro: refusals, each with why and fix.

Sources: gpufleet/matrix/record/SOURCES.md (``cuda-2404-start``, ``trt-4034``, ``gdc-head``,
``capture-2404``); the record's ``absent`` list says the same, so tests hold the two together.
"""

from __future__ import annotations

from gpufleet.matrix.drivers import version_tuple

# The oldest CUDA toolkit each distro folder has: NVIDIA's ubuntu2404 repository starts with
# CUDA 12.5 (its nvidia/cuda images begin at 12.5.x; devcontainers/features#1366).
REPO_OLDEST_CUDA: dict[str, str] = {"ubuntu2404": "12.5"}
# Distro folders without cuDNN 8: it was never published for Ubuntu 24.04 (NVIDIA/TensorRT#4034).
NO_CUDNN8_DISTROS = frozenset({"ubuntu2404"})
# Where a public record shows NVLSM (needed by Fabric Manager on HGX B200): NVIDIA's driver
# container installs it from ubuntu2204 and ubuntu2404 only (gpu-driver-container install.sh).
NVLSM_DISTROS = ("ubuntu2204", "ubuntu2404")

_OS_NAMES = {
    "ubuntu2004": "Ubuntu 20.04",
    "ubuntu2204": "Ubuntu 22.04",
    "ubuntu2404": "Ubuntu 24.04",
}


def os_name(distro: str) -> str:
    """``os_name("ubuntu2404") == "Ubuntu 24.04"`` (the folder name for others)."""
    return _OS_NAMES.get(distro, distro)


def repo_conflicts(
    *, distro: str, tf_version: str, tf_cuda: str, cuda: str, cudnn: str, nvlink5: bool
) -> list[str]:
    """Why the repository of ``distro`` cannot serve this stack, one sentence with a fix each.

    Example: ``repo_conflicts(distro="ubuntu2404", tf_version="2.17.1", tf_cuda="12.3",
    cuda="12.3", cudnn="8.9.7.29", nvlink5=False)`` -> ``["TensorFlow 2.17.1 needs CUDA 12.3
    ...", ...]``
    """
    conflicts: list[str] = []
    name = os_name(distro)
    oldest = REPO_OLDEST_CUDA.get(distro)
    if oldest and version_tuple(cuda) < version_tuple(oldest):
        if cuda == tf_cuda:
            conflicts.append(
                f"TensorFlow {tf_version} needs CUDA {cuda}, which NVIDIA never published for "
                f"{name} (its repository {distro} starts with CUDA {oldest}). Fix: use "
                f"TensorFlow >= 2.18 on {name}, or Ubuntu 22.04 for TensorFlow {tf_version}."
            )
        else:
            conflicts.append(
                f"cuda_version {cuda} is not in NVIDIA's {distro} repository ({name}), which "
                f"starts with CUDA {oldest}. Fix: set cuda_version to {oldest} or newer, or "
                "leave it unset."
            )
    if distro in NO_CUDNN8_DISTROS and cudnn.startswith("8."):
        conflicts.append(
            f"TensorFlow {tf_version} needs cuDNN {cudnn} (cuDNN 8), which NVIDIA never published "
            f"for {name}: its repository {distro} has cuDNN 9 only. Fix: use TensorFlow >= 2.18 "
            "there (cuDNN 9.3), or Ubuntu 22.04 for this TensorFlow."
        )
    if nvlink5 and distro not in NVLSM_DISTROS:
        conflicts.append(
            f"HGX B200 (NVLink 5) needs Fabric Manager with NVLSM, and no public record shows "
            f"nvlsm in NVIDIA's {distro} repository (NVIDIA installs it from "
            f"{' and '.join(NVLSM_DISTROS)}). Fix: provision Ubuntu 22.04 or 24.04 on this host."
        )
    return conflicts
