"""NVIDIA DCGM (datacenter-gpu-manager-4): the pinned version, its packages and where it installs.

Package names come from DCGM's own packaging (``cmake/packaging.cmake`` of NVIDIA/DCGM at
72fa3fea: base ``datacenter-gpu-manager-4``, a ``-core`` package and one ``-cuda<major>``
package per CUDA major, each depending on ``-core``); the service is ``nvidia-dcgm.service``
(``config-files/systemd/nvidia-dcgm.service.in``). Supported distributions: DCGM's
getting-started guide lists Ubuntu 22.04 and 24.04 only (docs.nvidia.com/datacenter/dcgm,
user-guide/getting-started.html), so Ubuntu 20.04 and Debian 12 get no DCGM from gpufleet.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.matrix.drivers import DRIVER_BRANCHES

# 4.5.1-1 is published for ubuntu2204/x86_64 in NVIDIA's CUDA repository
# (datacenter-gpu-manager-4-core_4.5.1-1_amd64.deb, as aws-parallelcluster-cookbook's
# nvidia_dcgm spec test downloads it); apt versions carry epoch 1 ("1:4.4.0-1" in
# nebius/soperator, "1:4.5.3-1" in Azure/azhpc-images).
DCGM_VERSION = "1:4.5.1-1"
DCGM_CORE = "datacenter-gpu-manager-4-core"
DCGM_SERVICE = "nvidia-dcgm"
# NVIDIA repository distro folders DCGM 4 supports (see the module docstring).
DCGM_DISTROS = ("ubuntu2204", "ubuntu2404")
# CUDA majors DCGM 4 builds for (-cuda11, -cuda12, -cuda13).
DCGM_CUDA_MAJORS = ("11", "12", "13")


# DCGM's diagnostics must match the CUDA major of the *driver* (its user-mode driver), not of
# the toolkit: R580 is CUDA 13, so it needs -cuda13; "Maxwell, Volta, and Pascal systems using
# driver version 580 should install DCGM packages targeting major version 12" (DCGM install
# guide, quoted in Azure/azhpc-images components/install_dcgm.sh). With -cuda<N> apt pulls
# -proprietary and -proprietary-cuda<N> (NVIDIA/DCGM#283): pinned here to the core's version
# so apt never picks a newer recommended build (record/SOURCES.md, azhpc-dcgm, dcgm-452).
DCGM_PROPRIETARY = "datacenter-gpu-manager-4-proprietary"
PRE_TURING = ("Maxwell", "Pascal", "Volta")


def driver_cuda_major(branch: int, architectures: Sequence[str] = ()) -> str:
    """The CUDA major DCGM must target for a driver branch and the host's GPU architectures.

    Example: ``driver_cuda_major(580) == "13"``; ``driver_cuda_major(580, ["Volta"]) == "12"``
    """
    major = DRIVER_BRANCHES[branch].max_cuda.split(".", 1)[0]
    if major == "13" and any(a in PRE_TURING for a in architectures):
        return "12"
    return major


def dcgm_cuda_package(cuda_version: str) -> str:
    """The DCGM package for a CUDA release: ``dcgm_cuda_package("12.5")`` ->
    ``"datacenter-gpu-manager-4-cuda12"``; ValueError for a major DCGM 4 does not build."""
    major = cuda_version.split(".", 1)[0]
    if major not in DCGM_CUDA_MAJORS:
        raise ValueError(
            f"DCGM 4 has no package for CUDA {cuda_version} (it builds for CUDA "
            f"{', '.join(DCGM_CUDA_MAJORS)}); set dcgm: off"
        )
    return f"datacenter-gpu-manager-4-cuda{major}"


def dcgm_packages(cuda_major: str, version: str = DCGM_VERSION) -> list[str]:
    """Pinned apt specs: ``-core``, ``-cuda<major>`` of the driver's CUDA major (see
    ``driver_cuda_major``) and the proprietary packages it pulls, all at one version.

    Example: ``dcgm_packages("13")[:2] == ["datacenter-gpu-manager-4-core=1:4.5.1-1",
    "datacenter-gpu-manager-4-cuda13=1:4.5.1-1"]``
    """
    cuda = dcgm_cuda_package(cuda_major)
    major = cuda_major.split(".", 1)[0]
    return [
        f"{DCGM_CORE}={version}",
        f"{cuda}={version}",
        f"{DCGM_PROPRIETARY}={version}",
        f"{DCGM_PROPRIETARY}-cuda{major}={version}",
    ]


def dcgm_unsupported_reason(repo_distro: str) -> str | None:
    """Why DCGM cannot be installed on this NVIDIA repository distro, else None.

    Example: ``dcgm_unsupported_reason("ubuntu2004")`` names the supported releases.
    """
    if repo_distro in DCGM_DISTROS:
        return None
    return (
        f"DCGM 4 is not published for {repo_distro}: NVIDIA's DCGM documentation lists "
        "Ubuntu 22.04 and 24.04 only"
    )
