"""NVIDIA driver branches, CUDA minimum drivers, repository distros and apt package names."""

from __future__ import annotations

from dataclasses import dataclass

# Minimum Linux driver per CUDA toolkit release (CUDA Toolkit release notes, table "CUDA Toolkit
# and Corresponding Driver Versions", Linux x86_64, GA releases). 12.x and 13.0: DESIGN.md's
# facts; 13.1-13.3: the same table as quoted in public code (e.g. "CUDA 13.1 GA >=590.44.01",
# "CUDA 13.2 GA >=595.45.04", "CUDA 13.3 GA >=610.43.02").
CUDA_MIN_DRIVER: dict[str, str] = {
    "12.0": "525.60.13",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
    "13.3": "610.43.02",
}

# CUDA minor-version compatibility: any 12.x toolkit runs on a driver >= 525.60.13, any 13.x on
# >= 580 (CUDA Compatibility guide, "Minor Version Compatibility"), with a reduced feature set:
# in particular no JIT of PTX newer than the driver.
MINOR_VERSION_COMPAT_MIN_DRIVER: dict[str, str] = {"12": "525.60.13", "13": "580.65.06"}


@dataclass(frozen=True)
class DriverBranch:
    """One NVIDIA driver branch.

    ``latest``: the newest full driver version of the branch known to this table (what the
    sandbox's stand-in packages carry and what a fresh install is expected to get);
    ``names_have_branch``: whether the driver's Ubuntu/Debian package names carry the branch
    number (``cuda-drivers-570``, ``libnvidia-compute-580``; Fabric Manager, NSCQ and NVSDM drop
    it one branch earlier, at R580: ``apt_names.FABRIC_UNSUFFIXED_FROM``);
    ``has_pinning_package``: whether
    NVIDIA's repository has ``nvidia-driver-pinning-<branch>`` for it.

    Example: ``DRIVER_BRANCHES[580].max_cuda == "13.0"``
    """

    branch: int
    max_cuda: str
    long_term: bool
    last_for_pre_turing: bool
    names_have_branch: bool
    latest: str
    has_pinning_package: bool = False


# max_cuda: the CUDA release whose minimum driver falls in the branch (table above).
# long_term: NVIDIA Data Center Drivers, "Supported Drivers and CUDA Toolkit Versions": R535
#   (LTSB, end of life June 2026), R580 (LTSB, June 2028), R620 (LTSB, September 2029); R595 is
#   a production branch (March 2027), R610 a new-feature branch.
# last_for_pre_turing: R580 is the last branch for Maxwell, Pascal and Volta (DESIGN.md).
# names_have_branch: from R590 the Ubuntu packages drop the branch from their names (NVIDIA
#   driver installation guide, "Ubuntu 590 and later packages").
# has_pinning_package: NVIDIA's guide introduces nvidia-driver-pinning-<branch> with the
#   580-era packaging; public deploy scripts install nvidia-driver-pinning-580/-590/-610. For
#   older branches no such package is documented, so the driver stage locks with apt
#   preferences instead.
# latest (newest version each source shows):
#   535.288.01  developer.download.nvidia.com/compute/nvidia-driver/redist/redistrib_535.288.01.json
#   550.163.01  Debian trixie nvidia-open-gpu-kernel-modules 550.163.01-2
#   555.58.02   NVIDIA/open-gpu-kernel-modules releases; Debian experimental 555.58.02-1
#   560.35.03   the driver of the CUDA 12.6.2 runfile (cuda_12.6.2_560.35.03_linux.run)
#   570.172.08  docs.nvidia.com/datacenter/tesla, "R570 Driver Release Notes"
#   575.57.08   docs.nvidia.com/datacenter/tesla, "R575 Driver Release Notes"
#   580.173.02  Ubuntu linux-modules-nvidia-580-open-generic: nvidia-kernel-common-580 >= it
#   590.48.01   NVIDIA forums "Current graphics driver releases": new feature branch release
#   595.71.05   Ubuntu linux-modules-nvidia-595-open-generic-hwe-24.04: nvidia-kernel-common-595
#   610.57.04   .../nvidia-driver/redist/redistrib_610.57.04.json (2026-08-03, cuda_compat 13.3)
#   620.70.06   .../nvidia-driver/redist/redistrib_620.70.06.json (2026-11-04, cuda_compat 13.5)
# No version of R565 or R615 was found in a source, so those branches are not in the table.
DRIVER_BRANCHES: dict[int, DriverBranch] = {
    b.branch: b
    for b in (
        DriverBranch(535, "12.2", True, False, True, "535.288.01"),
        DriverBranch(550, "12.4", False, False, True, "550.163.01"),
        DriverBranch(555, "12.5", False, False, True, "555.58.02"),
        DriverBranch(560, "12.6", False, False, True, "560.35.03"),
        DriverBranch(570, "12.8", False, False, True, "570.172.08"),
        DriverBranch(575, "12.9", False, False, True, "575.57.08"),
        DriverBranch(580, "13.0", True, True, True, "580.173.02", True),
        DriverBranch(590, "13.1", False, False, False, "590.48.01", True),
        DriverBranch(595, "13.2", False, False, False, "595.71.05", True),
        DriverBranch(610, "13.3", False, False, False, "610.57.04", True),
        DriverBranch(620, "13.5", True, False, False, "620.70.06", True),
    )
}

DEFAULT_DRIVER_BRANCH = 580


def branch_of(driver_version: str) -> int:
    """The branch of a full driver version: ``branch_of("555.42.02") == 555``."""
    return int(driver_version.split(".", 1)[0])


def version_tuple(version: str) -> tuple[int, ...]:
    """Numeric tuple for comparing dotted versions: ``version_tuple("12.5") == (12, 5)``."""
    return tuple(int(part) for part in version.split("."))


# OS -> the distro folder of NVIDIA's CUDA repository
# (https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/). Every distro here
# has both x86_64 and sbsa folders (DESIGN.md; e.g. repos/debian12/sbsa/3bf863cc.pub and
# repos/ubuntu2004/sbsa/cuda-keyring_1.1-1_all.deb in public install scripts).
NVIDIA_REPO_DISTROS: dict[tuple[str, str], str] = {
    ("ubuntu", "20.04"): "ubuntu2004",
    ("ubuntu", "22.04"): "ubuntu2204",
    ("ubuntu", "24.04"): "ubuntu2404",
    ("debian", "12"): "debian12",
}

# Distro folders where NVIDIA's repository stops short of the branch table: the newest branch
# it publishes there. ubuntu2004 ends with CUDA 12.9 and R575: CUDA 12.9.1's ubuntu2004
# repository ships driver 575.57.08 (cuda-repo-ubuntu2004-12-9-local_12.9.1-575.57.08-1, in
# many public install scripts); R580 arrived with CUDA 13.0, whose driver installation guide
# (docs.nvidia.com/datacenter/tesla/driver-installation-guide, "Linux System Requirements")
# lists Ubuntu 22.04 and 24.04 but no longer 20.04, and Ubuntu's own archive builds
# linux-modules-nvidia-580 for jammy and later only (packages.ubuntu.com). Not read from the
# repository's own index, which these machines cannot reach.
REPO_NEWEST_BRANCH: dict[str, int] = {"ubuntu2004": 575}

# `uname -m` / pyinfra's Arch fact -> the repository's architecture folder.
NVIDIA_REPO_ARCHES: dict[str, str] = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "sbsa",
    "arm64": "sbsa",
    "sbsa": "sbsa",
}

# The repository's signing key file (cuda-keyring 1.1 era, key id 3BF863CC) per distro/arch.
NVIDIA_REPO_KEY_FILE = "3bf863cc.pub"
