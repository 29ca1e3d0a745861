"""Compatibility facts (TF, Python, CUDA, cuDNN, NCCL, driver, GPUs) and the resolver over them.

The tables live in sibling modules a reviewer can read against their sources:
``tf_releases`` (TensorFlow builds), ``drivers`` (branches, CUDA minimum drivers, repository
names) and ``gpus`` (PCI device ids). This module adds ``resolve``; the package re-exports both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpufleet.matrix.apt_names import apt_packages
from gpufleet.matrix.checks import (
    KERNEL_MODULE_FLAVORS,
    check_branch_for_gpus,
    check_cuda_override,
    check_driver_for_gpus,
    check_python,
    pick_branch,
    pick_flavor,
)
from gpufleet.matrix.dcgm import DCGM_DISTROS, dcgm_packages, driver_cuda_major
from gpufleet.matrix.drivers import (
    CUDA_MIN_DRIVER,
    DEFAULT_DRIVER_BRANCH,
    DRIVER_BRANCHES,
    MINOR_VERSION_COMPAT_MIN_DRIVER,
    NVIDIA_REPO_ARCHES,
    NVIDIA_REPO_DISTROS,
    NVIDIA_REPO_KEY_FILE,
    REPO_NEWEST_BRANCH,
    DriverBranch,
    branch_of,
)
from gpufleet.matrix.gpus import GPUS, GpuModel, gpu_by_device_id
from gpufleet.matrix.repo_limits import repo_conflicts
from gpufleet.matrix.repo_record import spec_warnings
from gpufleet.matrix.tf_releases import TF_RELEASES, TFRelease

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
    "REPO_NEWEST_BRANCH",
    "TF_RELEASES",
    "DriverBranch",
    "GpuModel",
    "MatrixError",
    "Resolution",
    "TFRelease",
    "apt_specs",
    "constraints_file",
    "gpu_by_device_id",
    "nvidia_repo_arch",
    "nvidia_repo_distro",
    "resolve",
    "unknown_tf_message",
]


class MatrixError(ValueError):
    """A request the matrix cannot satisfy; ``conflicts`` lists each one with its fix."""

    def __init__(self, conflicts: Sequence[str]):
        self.conflicts = list(conflicts)
        if len(self.conflicts) == 1:
            message = self.conflicts[0]
        else:
            lines = [f"{len(self.conflicts)} version conflicts:"]
            lines += [f"  - {conflict}" for conflict in self.conflicts]
            message = "\n".join(lines)
        super().__init__(message)


@dataclass(frozen=True)
class Resolution:
    """Concrete versions and apt package specs for one host.

    ``cuda`` is the system CUDA toolkit to install (TF's build CUDA unless overridden);
    ``tf_cuda`` the CUDA the TF wheels were built with. Apt specs are ``name=version`` or a
    bare name where the name itself (``cuda-toolkit-12-5``) or the pinning package pins it.
    """

    tf_version: str
    python_min: str
    python_max: str
    cuda: str
    cudnn: str
    nccl: str
    driver_branch: int
    min_driver: str
    kernel_module_flavor: str
    wheel_constraints: dict[str, str] = field(hash=False)
    warnings: list[str] = field(hash=False)
    driver_packages: list[str] = field(hash=False)
    pinning_package: str | None
    fabricmanager_package: str | None
    cuda_toolkit_package: str
    cudnn_packages: list[str] = field(hash=False)
    nccl_packages: list[str] = field(hash=False)
    tf_cuda: str = ""
    driver_version: str = ""
    repo_distro: str = ""
    repo_arch: str = ""
    gpu_names: tuple[str, ...] = ()
    has_nvswitch: bool = False
    # Fabric Manager first, then NSCQ (and NVLSM, NVSDM on NVLink 5 boards); empty without a
    # fabric. ``nvlink5``: a GPU that only ships on NVLink 5 boards (HGX B200) is present.
    fabric_packages: list[str] = field(default_factory=list, hash=False)
    nvlink5: bool = False
    # DCGM 4 for the driver's CUDA major, pinned (empty where DCGM is not published).
    dcgm_packages: list[str] = field(default_factory=list, hash=False)


def apt_specs(resolution: Resolution) -> list[str]:
    """Every apt spec a host with this resolution can get from NVIDIA's repository, in install
    order (pinning package, driver, fabric, toolkit, cuDNN, NCCL, DCGM)."""
    r = resolution
    return [
        *([r.pinning_package] if r.pinning_package else []),
        *r.driver_packages,
        *r.fabric_packages,
        r.cuda_toolkit_package,
        *r.cudnn_packages,
        *r.nccl_packages,
        *r.dcgm_packages,
    ]


def nvidia_repo_distro(os_id: str, os_version: str) -> str:
    """NVIDIA repository distro folder, e.g. ``("ubuntu", "22.04") -> "ubuntu2204"``."""
    key = (os_id.strip().lower(), os_version.strip())
    if key[0] == "debian":
        key = ("debian", key[1].split(".", 1)[0])
    distro = NVIDIA_REPO_DISTROS.get(key)
    if distro is None:
        supported = ", ".join(f"{i} {v}" for i, v in NVIDIA_REPO_DISTROS)
        raise MatrixError(
            [
                f"OS {os_id} {os_version} is not supported; supported: {supported}. "
                "Fix: provision one of those releases."
            ]
        )
    return distro


def nvidia_repo_arch(machine: str) -> str:
    """NVIDIA repository arch folder: ``nvidia_repo_arch("aarch64") == "sbsa"``."""
    arch = NVIDIA_REPO_ARCHES.get(machine.strip().lower())
    if arch is None:
        raise MatrixError(
            [
                f"architecture {machine!r} is not supported; supported: x86_64, aarch64 (sbsa). "
                "Fix: use an x86_64 or aarch64 host."
            ]
        )
    return arch


def constraints_file(tf_version: str) -> str:
    """pip constraints text pinning every ``nvidia-*`` wheel of TF's ``and-cuda`` extra.

    Example: ``"nvidia-cudnn-cu12==9.3.0.75" in constraints_file("2.21.0")``
    """
    release = _release_or_raise(tf_version)
    lines = [
        f"# gpufleet: nvidia-* wheels TensorFlow {release.version} was built and tested with",
        f"# (CUDA {release.cuda}, cuDNN {release.cudnn}, NCCL {release.nccl}).",
    ]
    lines += [f"{name}=={version}" for name, version in sorted(release.wheels.items())]
    return "\n".join(lines) + "\n"


def _release_or_raise(tf_version: str) -> TFRelease:
    release = TF_RELEASES.get(tf_version)
    if release is None:
        raise MatrixError([unknown_tf_message(tf_version)])
    return release


def unknown_tf_message(tf_version: str) -> str:
    """The refusal for a TensorFlow version the matrix does not know, listing the known ones."""
    known = ", ".join(TF_RELEASES)
    return (
        f"TensorFlow {tf_version!r} is not in the version matrix (known: {known}). "
        "Fix: set tf_version to one of the known releases."
    )


def resolve(
    tf_version: str,
    *,
    os_id: str,
    os_version: str,
    arch: str = "x86_64",
    gpu_device_ids: Sequence[str] = (),
    driver_branch: int | None = None,
    cuda_version: str | None = None,
    kernel_module_flavor: str = "auto",
    python_version: str | None = None,
    require_cuda_build: bool = True,
) -> Resolution:
    """Resolve a request into concrete versions, or raise ``MatrixError`` listing every conflict.

    Example::

        r = resolve("2.21.0", os_id="ubuntu", os_version="22.04", gpu_device_ids=["2330"])
        r.cuda, r.cudnn, r.driver_branch  # ("12.5", "9.3.0.75", 580)

    ``python_version`` is the Python of a conda (or uv) environment; a plain venv's interpreter
    depends on the host's OS: ``os_python.venv_python_conflict`` (preflight) checks it.
    ``require_cuda_build``: refuse an aarch64 host with GPUs, where PyPI's TensorFlow has no
    CUDA (with False: a warning, and the rest of the stack is provisioned).
    """
    conflicts: list[str] = []
    warnings: list[str] = []
    release = TF_RELEASES.get(tf_version)
    if release is None:
        conflicts.append(unknown_tf_message(tf_version))
    distro = repo_arch = ""
    try:
        distro = nvidia_repo_distro(os_id, os_version)
    except MatrixError as exc:
        conflicts.extend(exc.conflicts)
    try:
        repo_arch = nvidia_repo_arch(arch)
    except MatrixError as exc:
        conflicts.extend(exc.conflicts)

    gpus: list[GpuModel] = []
    has_nvswitch = False
    unknown_gpus = 0
    for device_id in gpu_device_ids:
        model = gpu_by_device_id(device_id)
        if model is None:
            unknown_gpus += 1
            warnings.append(
                f"PCI device 10de:{device_id} is not in the GPU table: no compatibility checks"
                " for it. Add it to gpufleet/matrix/gpus.py with its datasheet figures."
            )
        elif model.is_nvswitch:
            has_nvswitch = True
        elif model not in gpus:
            gpus.append(model)

    if release is not None and python_version is not None:
        check_python(release, python_version, conflicts)

    cuda_needed_branch = 0
    if cuda_version is not None and cuda_version not in CUDA_MIN_DRIVER:
        conflicts.append(
            f"cuda_version {cuda_version!r} is not in the matrix (known: "
            f"{', '.join(CUDA_MIN_DRIVER)}). Fix: pick one of those, or leave it unset."
        )
        cuda_version = None
    elif cuda_version is not None:
        cuda_needed_branch = branch_of(CUDA_MIN_DRIVER[cuda_version])

    newest = REPO_NEWEST_BRANCH.get(distro)
    branch = (
        pick_branch(gpus, cuda_needed_branch, newest) if driver_branch is None else driver_branch
    )
    if newest is not None and branch > newest:
        conflicts.append(
            f"driver branch {branch} is not published in NVIDIA's {distro} repository, whose "
            f"newest branch is {newest} (NVIDIA's CUDA repository for {os_id} {os_version} ends "
            f"with CUDA {DRIVER_BRANCHES[newest].max_cuda}). Fix: set driver_branch to "
            f"{newest} or older (or leave it unset), or provision a newer OS release for GPUs "
            "that need a newer branch."
        )
    if branch not in DRIVER_BRANCHES:
        conflicts.append(
            f"driver_branch {branch} is not in the matrix (known: "
            f"{', '.join(map(str, DRIVER_BRANCHES))}). Fix: pick one of those, or leave it"
            f" unset for {DEFAULT_DRIVER_BRANCH}."
        )
    if branch in DRIVER_BRANCHES:
        check_branch_for_gpus(branch, gpus, conflicts)
        if cuda_version is not None:
            check_cuda_override(cuda_version, branch, conflicts, warnings)

    flavor = pick_flavor(kernel_module_flavor, gpus, branch, conflicts)
    if release is not None:
        check_driver_for_gpus(release, branch, gpus, conflicts, warnings)
    nvlink5 = any(g.nvlink5_fabric for g in gpus)
    if release is not None and distro:
        conflicts += repo_conflicts(
            distro=distro,
            tf_version=release.version,
            tf_cuda=release.cuda,
            cuda=cuda_version or release.cuda,
            cudnn=release.cudnn,
            nvlink5=nvlink5,
        )
    if repo_arch == "sbsa" and (gpus or unknown_gpus):
        # tensorflow/tensorflow#121157: "TensorFlow PyPI aarch64 wheels aren't built with CUDA"
        arm64 = (
            "TensorFlow's PyPI wheels for aarch64 are built without CUDA (tensorflow/tensorflow"
            "#121157): TensorFlow on this arm64 host would not use its GPUs."
        )
        if require_cuda_build:
            conflicts.append(
                f"{arm64} Fix: run TensorFlow from NVIDIA's NGC containers "
                "(nvcr.io/nvidia/tensorflow, built for arm64 with CUDA) on this host, or set "
                "require_cuda_build = False to provision the driver and CUDA stack without a "
                "CUDA TensorFlow."
            )
        else:
            warnings.append(f"{arm64} Use NVIDIA's NGC containers (nvcr.io/nvidia/tensorflow).")
    if conflicts or release is None:
        raise MatrixError(conflicts)

    cuda = cuda_version or release.cuda
    packages, notes = apt_packages(
        branch=branch,
        flavor=flavor,
        cuda=cuda,
        cudnn=release.cudnn,
        nccl=release.nccl,
        nvswitch=has_nvswitch,
        nvlink5=nvlink5,
        repo_arch=repo_arch,
    )
    warnings.extend(notes)
    branch_info = DRIVER_BRANCHES[branch]
    dcgm = (
        dcgm_packages(driver_cuda_major(branch, [g.architecture for g in gpus]))
        if distro in DCGM_DISTROS
        else []
    )
    resolution = Resolution(
        tf_version=release.version,
        python_min=release.python_min,
        python_max=release.python_max,
        cuda=cuda,
        cudnn=release.cudnn,
        nccl=release.nccl,
        driver_branch=branch,
        min_driver=CUDA_MIN_DRIVER[release.cuda],
        kernel_module_flavor=flavor,
        wheel_constraints=dict(release.wheels),
        warnings=warnings,
        driver_packages=packages.driver_packages,
        pinning_package=packages.pinning_package,
        fabricmanager_package=packages.fabricmanager_package,
        cuda_toolkit_package=packages.cuda_toolkit_package,
        cudnn_packages=packages.cudnn_packages,
        nccl_packages=packages.nccl_packages,
        tf_cuda=release.cuda,
        driver_version=branch_info.latest,
        repo_distro=distro,
        repo_arch=repo_arch,
        gpu_names=tuple(g.name for g in gpus),
        has_nvswitch=has_nvswitch,
        fabric_packages=packages.fabric_packages,
        nvlink5=nvlink5,
        dcgm_packages=dcgm,
    )
    warnings.extend(spec_warnings(distro, repo_arch, apt_specs(resolution), branch))
    return resolution
