"""Package names and versions in NVIDIA's CUDA apt repository for a resolved stack."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.matrix.drivers import DRIVER_BRANCHES, version_tuple

# NCCL version -> the CUDA releases NVIDIA's repository builds `libnccl2` / `libnccl-dev` for; the
# Debian version is "<nccl>-1+cuda<X.Y>". Sources: public install scripts and NVIDIA CUDA image
# environments quoting `apt install libnccl2=<version>` against the CUDA repository, e.g.
# NV_LIBNCCL_PACKAGE=libnccl2=2.19.3-1+cuda12.2 and =2.25.1-1+cuda12.8 (nvidia/cuda images),
# libnccl2=2.16.5-1+cuda12.0, 2.21.5-1+cuda12.4 (DESIGN.md), 2.23.4-1+cuda12.6, 2.25.1-1+cuda12.4,
# 2.27.7-1+cuda12.9 and 2.27.7-1+cuda13.0.
NCCL_DEB_CUDA: dict[str, tuple[str, ...]] = {
    "2.16.5": ("11.8", "12.0"),
    "2.19.3": ("12.0", "12.2"),
    "2.21.5": ("12.4",),
    "2.23.4": ("12.6",),
    "2.25.1": ("12.4", "12.8"),
    "2.27.7": ("12.9", "13.0"),
}

# cuDNN version -> (runtime package, dev package, Debian version). cuDNN 9 packages are named
# per CUDA major (`libcudnn9-cuda-12`, DESIGN.md: "libcudnn9-cuda-12=9.3.0.75-1"); cuDNN 8
# packages carry the CUDA they were built for in the version instead.
CUDNN_DEBS: dict[str, tuple[str, str, str]] = {
    "8.9.4.25": ("libcudnn8", "libcudnn8-dev", "8.9.4.25-1+cuda12.2"),
    "8.9.7.29": ("libcudnn8", "libcudnn8-dev", "8.9.7.29-1+cuda12.2"),
    "9.3.0.75": ("libcudnn9-cuda-12", "libcudnn9-dev-cuda-12", "9.3.0.75-1"),
}


@dataclass(frozen=True)
class AptPackages:
    """The apt specs of one resolution (see ``matrix.Resolution`` for the field meanings)."""

    driver_packages: list[str]
    pinning_package: str | None
    fabricmanager_package: str | None
    fabric_packages: list[str]
    cuda_toolkit_package: str
    cudnn_packages: list[str]
    nccl_packages: list[str]


# Branches whose open kernel modules NVIDIA's CUDA repository does not package: "the CUDA APT
# repository does not include the nvidia-driver-535-open package" (NVIDIA/open-gpu-kernel-modules
# discussion, quoted in public code); Ubuntu's own archive has it, with other version strings.
NO_OPEN_PACKAGE_BRANCHES = frozenset({535})


def driver_package_names(branch: int, flavor: str) -> tuple[list[str], str | None]:
    """Driver metapackages and the branch pinning package, if the branch has one.

    From R580, NVIDIA's guide installs ``nvidia-driver-pinning-<branch>`` first and then the
    unversioned ``nvidia-open`` (open modules) or ``cuda-drivers`` (proprietary), which the
    pinning package holds on the branch. Older branches use per-branch metapackages that the
    driver stage further locks with apt preferences: ``cuda-drivers-<branch>`` (DESIGN.md) and
    ``nvidia-open-<branch>`` (installed from the CUDA repository by public scripts for 560, 565,
    570 and 580). For 550 and 555 no source shows an ``nvidia-open-<branch>`` package; the
    repository's Ubuntu-style ``nvidia-driver-<branch>-open`` (seen for 560) is used instead,
    an assumption not checked against the repository's index.

    Example: ``driver_package_names(580, "open") == (["nvidia-open"], "nvidia-driver-pinning-580")``
    """
    info = DRIVER_BRANCHES[branch]
    if info.has_pinning_package:
        return ["nvidia-open" if flavor == "open" else "cuda-drivers"], (
            f"nvidia-driver-pinning-{branch}"
        )
    if flavor != "open":
        return [f"cuda-drivers-{branch}"], None
    if branch < 560:
        return [f"nvidia-driver-{branch}-open"], None
    return [f"nvidia-open-{branch}"], None


# From R580 NVIDIA's repositories ship Fabric Manager, NSCQ and NVSDM unsuffixed
# (``nvidia-fabricmanager`` 580.x Provides the virtual ``nvidia-fabricmanager-580``), while the
# driver's own sub-packages keep the branch until R590: NVIDIA/gpu-driver-container#451 and
# commit 78fa4ac, Azure/azhpc-images install_nvidia_fabric_manager.sh (record/SOURCES.md).
FABRIC_UNSUFFIXED_FROM = 580
# NVLink Subnet Manager for NVLink 5 baseboards (HGX B200): one package for every branch.
NVLSM_PACKAGE = "nvlsm"


def _fabric_name(base: str, branch: int) -> str:
    return base if branch >= FABRIC_UNSUFFIXED_FROM else f"{base}-{branch}"


def fabricmanager_package_name(branch: int) -> str:
    """The real Fabric Manager package: ``nvidia-fabricmanager-<branch>`` before R580, then
    ``nvidia-fabricmanager`` (never the virtual ``nvidia-fabricmanager-580``).

    Example: ``fabricmanager_package_name(575) == "nvidia-fabricmanager-575"``
    """
    return _fabric_name("nvidia-fabricmanager", branch)


def fabric_package_names(branch: int, *, nvlink5: bool, repo_arch: str) -> list[str]:
    """Fabric Manager first, then NSCQ (DCGM needs it to see NVSwitches) and, on NVLink 5
    boards, NVLSM and (x86_64 only: NVIDIA builds no arm64 libnvsdm) NVSDM.

    Example: ``fabric_package_names(580, nvlink5=True, repo_arch="x86_64") ==
    ["nvidia-fabricmanager", "libnvidia-nscq", "nvlsm", "libnvsdm"]``
    """
    names = [fabricmanager_package_name(branch), _fabric_name("libnvidia-nscq", branch)]
    if nvlink5:
        names.append(NVLSM_PACKAGE)
        if repo_arch == "x86_64":
            names.append(_fabric_name("libnvsdm", branch))
    return names


def nccl_build_for(nccl: str, cuda: str) -> str | None:
    """The CUDA build of an NCCL release to install next to a CUDA toolkit.

    The newest build for the same CUDA major that is not newer than the toolkit, else the
    oldest build of that major (it still runs: the driver, not the toolkit, bounds it).
    Example: ``nccl_build_for("2.25.1", "12.5") == "12.4"``
    """
    builds = NCCL_DEB_CUDA.get(nccl, ())
    same_major = [b for b in builds if b.split(".")[0] == cuda.split(".")[0]]
    if not same_major:
        return None
    not_newer = [b for b in same_major if version_tuple(b) <= version_tuple(cuda)]
    return max(not_newer, key=version_tuple) if not_newer else min(same_major, key=version_tuple)


def apt_packages(
    *,
    branch: int,
    flavor: str,
    cuda: str,
    cudnn: str,
    nccl: str,
    nvswitch: bool,
    nvlink5: bool = False,
    repo_arch: str = "x86_64",
) -> tuple[AptPackages, list[str]]:
    """Apt specs for a resolved stack, and notes where a version is not known to the tables."""
    notes: list[str] = []
    driver, pinning = driver_package_names(branch, flavor)
    cuda_toolkit = "cuda-toolkit-" + cuda.replace(".", "-")
    if cudnn in CUDNN_DEBS:
        runtime, dev, deb = CUDNN_DEBS[cudnn]
        cudnn_packages = [f"{runtime}={deb}", f"{dev}={deb}"]
    else:
        major = cudnn.split(".", 1)[0]
        cudnn_packages = [f"libcudnn{major}-cuda-12", f"libcudnn{major}-dev-cuda-12"]
        notes.append(f"cuDNN {cudnn}: no known Debian version; packages left unpinned")
    nccl_cuda = nccl_build_for(nccl, cuda)
    if nccl_cuda is None:
        nccl_packages = ["libnccl2", "libnccl-dev"]
        notes.append(f"NCCL {nccl}: no known build in NVIDIA's repository; left unpinned")
    else:
        deb = f"{nccl}-1+cuda{nccl_cuda}"
        nccl_packages = [f"libnccl2={deb}", f"libnccl-dev={deb}"]
    fabric = (
        fabric_package_names(branch, nvlink5=nvlink5, repo_arch=repo_arch)
        if nvswitch or nvlink5
        else []
    )
    packages = AptPackages(
        driver_packages=driver,
        pinning_package=pinning,
        fabricmanager_package=fabric[0] if fabric else None,
        fabric_packages=fabric,
        cuda_toolkit_package=cuda_toolkit,
        cudnn_packages=cudnn_packages,
        nccl_packages=nccl_packages,
    )
    return packages, notes
