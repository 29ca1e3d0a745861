"""Checks of one request against the compatibility tables; each appends its conflicts."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.matrix.apt_names import NO_OPEN_PACKAGE_BRANCHES
from gpufleet.matrix.drivers import (
    CUDA_MIN_DRIVER,
    DEFAULT_DRIVER_BRANCH,
    DRIVER_BRANCHES,
    MINOR_VERSION_COMPAT_MIN_DRIVER,
    branch_of,
    version_tuple,
)
from gpufleet.matrix.gpus import GpuModel
from gpufleet.matrix.tf_releases import TF_RELEASES, TFRelease

KERNEL_MODULE_FLAVORS = ("auto", "open", "proprietary")


def runs_natively(gpu: GpuModel, cuda_arch: Sequence[str]) -> bool:
    """Whether the wheels carry SASS (``sm_XY``) that this GPU runs without PTX JIT.

    SASS built for X.Y runs on X.Z for Z >= Y (same major) only.
    """
    major, minor = gpu.compute_capability
    for target in cuda_arch:
        if target.startswith("sm_"):
            digits = target[3:]
            if int(digits[:-1]) == major and int(digits[-1]) <= minor:
                return True
    return False


def jit_target(gpu: GpuModel, cuda_arch: Sequence[str]) -> str | None:
    """The ``compute_XY`` PTX the driver would JIT for this GPU, if any."""
    candidates = [
        t
        for t in cuda_arch
        if t.startswith("compute_") and (int(t[8:-1]), int(t[-1])) <= gpu.compute_capability
    ]
    return max(candidates, key=lambda t: int(t[8:])) if candidates else None


def _sm(gpu: GpuModel) -> str:
    return "sm_{}{}".format(*gpu.compute_capability)


def pick_branch(gpus: Sequence[GpuModel], needed: int, newest: int | None = None) -> int:
    """Default branch: 580 (long-term, last for Volta) unless the GPUs or CUDA need newer, or
    the distro's repository stops at an older ``newest`` branch (R575 on Ubuntu 20.04)."""
    default = DEFAULT_DRIVER_BRANCH if newest is None else min(DEFAULT_DRIVER_BRANCH, newest)
    need = max([default, needed, *(g.min_driver_branch for g in gpus)])
    return min(b for b in DRIVER_BRANCHES if b >= need) if need <= max(DRIVER_BRANCHES) else need


def pick_flavor(requested: str, gpus: Sequence[GpuModel], branch: int, conflicts: list[str]) -> str:
    if requested not in KERNEL_MODULE_FLAVORS:
        conflicts.append(
            f"kernel_module_flavor {requested!r} is not one of {', '.join(KERNEL_MODULE_FLAVORS)}."
            " Fix: use auto (open for Turing and newer, proprietary for Volta)."
        )
        requested = "auto"
    no_open = sorted({g.name for g in gpus if g.open_modules == "unsupported"})
    need_open = sorted({g.name for g in gpus if g.open_modules == "required"})
    if no_open and need_open:
        conflicts.append(
            f"{', '.join(no_open)} cannot run the open kernel modules but {', '.join(need_open)}"
            " requires them. Fix: put these GPUs in different hosts."
        )
    if requested == "open" and no_open:
        conflicts.append(
            f"kernel_module_flavor 'open' does not support {', '.join(no_open)} (pre-Turing)."
            " Fix: set kernel_module_flavor to 'proprietary' or 'auto'."
        )
    if requested == "proprietary" and need_open:
        conflicts.append(
            f"kernel_module_flavor 'proprietary' cannot drive {', '.join(need_open)}: NVIDIA "
            "supports only the open kernel modules there. Fix: set kernel_module_flavor to "
            "'open' or 'auto'."
        )
    if branch in NO_OPEN_PACKAGE_BRANCHES:
        if requested == "open":
            conflicts.append(
                f"kernel_module_flavor 'open' on driver branch {branch}: NVIDIA's CUDA "
                f"repository has no open-module package for R{branch}. Fix: set "
                "kernel_module_flavor to 'proprietary' (or 'auto'), or driver_branch to 580."
            )
        if not need_open:
            return "proprietary"
    if requested != "auto":
        return requested
    return "proprietary" if no_open else "open"


def check_python(release: TFRelease, python_version: str, conflicts: list[str]) -> None:
    try:
        wanted = version_tuple(python_version)[:2]
    except ValueError:
        conflicts.append(f"python_version {python_version!r} is not a version like '3.11'.")
        return
    if not _supports(release, wanted):
        conflicts.append(
            f"TensorFlow {release.version} supports Python {release.python_min} to "
            f"{release.python_max}, not {python_version}. Fix: set python_version within "
            f"that range{_other_release(python_version, wanted)}."
        )


def _supports(release: TFRelease, wanted: tuple[int, ...]) -> bool:
    return version_tuple(release.python_min) <= wanted <= version_tuple(release.python_max)


def _other_release(python_version: str, wanted: tuple[int, ...]) -> str:
    """The end of the fix: the newest release that takes this Python, or, when none does (3.8),
    the Pythons that some release takes (conda and uv bring their own)."""
    fits = [r for r in TF_RELEASES.values() if _supports(r, wanted)]
    if fits:
        newest = max(fits, key=lambda r: version_tuple(r.version))
        return f", or tf_version = '{newest.version}' (the newest that supports {python_version})"
    low = min((r.python_min for r in TF_RELEASES.values()), key=version_tuple)
    high = max((r.python_max for r in TF_RELEASES.values()), key=version_tuple)
    return (
        f" (no TensorFlow release gpufleet knows supports {python_version}; they take {low} to "
        f"{high}); where the OS's Python is older, python_env = 'conda' or use_uv = True bring "
        "their own"
    )


def check_driver_for_gpus(
    release: TFRelease,
    branch: int,
    gpus: Sequence[GpuModel],
    conflicts: list[str],
    warnings: list[str],
) -> None:
    """Driver branch against TF's build CUDA, per GPU (native SASS vs PTX JIT)."""
    min_driver = CUDA_MIN_DRIVER[release.cuda]
    min_branch = branch_of(min_driver)
    fix_branch = max(DEFAULT_DRIVER_BRANCH, min_branch)
    compat_min = MINOR_VERSION_COMPAT_MIN_DRIVER[release.cuda.split(".")[0]]
    for gpu in gpus:
        if runs_natively(gpu, release.cuda_arch):
            continue
        jit = jit_target(gpu, release.cuda_arch)
        if jit is None:
            conflicts.append(
                f"TensorFlow {release.version} wheels carry no code for {gpu.name} "
                f"({_sm(gpu)}; built for {', '.join(release.cuda_arch)}). Fix: pick a "
                "TensorFlow release built for this GPU."
            )
        elif branch < min_branch:
            conflicts.append(
                f"TensorFlow {release.version} wheels carry no {_sm(gpu)} code for {gpu.name},"
                f" only {jit} PTX (CUDA {release.cuda}), so the GPU needs PTX JIT, which needs"
                f" driver >= {min_driver}; driver branch {branch} is older and CUDA minor-version"
                f" compatibility does not JIT newer PTX. Fix: set driver_branch to {min_branch}"
                f" or newer (e.g. {fix_branch}), or leave it unset to get {fix_branch}."
            )
    if branch < branch_of(compat_min):
        conflicts.append(
            f"driver branch {branch} is older than {compat_min}, the minimum for CUDA "
            f"{release.cuda} even with minor-version compatibility (TensorFlow "
            f"{release.version}). Fix: set driver_branch to {fix_branch}."
        )
    elif branch < min_branch and not any("PTX JIT" in c for c in conflicts):
        warnings.append(
            f"driver branch {branch} is older than {min_driver}, the minimum for CUDA "
            f"{release.cuda} that TensorFlow {release.version} was built with: it runs through "
            "CUDA minor-version compatibility (no PTX JIT of newer code, some APIs missing)."
            f" Set driver_branch to {fix_branch} to remove this limit."
        )


def check_branch_for_gpus(branch: int, gpus: Sequence[GpuModel], conflicts: list[str]) -> None:
    """The branches that support each GPU: Blackwell needs 570+, Volta ends with 580."""
    for gpu in gpus:
        if branch < gpu.min_driver_branch:
            fix = max(gpu.min_driver_branch, DEFAULT_DRIVER_BRANCH)
            conflicts.append(
                f"{gpu.name} needs driver branch {gpu.min_driver_branch} or newer; driver_branch"
                f" is {branch}. Fix: set driver_branch to {fix}."
            )
        if gpu.max_driver_branch is not None and branch > gpu.max_driver_branch:
            conflicts.append(
                f"driver branch {branch} no longer supports {gpu.name} ({gpu.architecture}); "
                f"branch {gpu.max_driver_branch} is the last that does. Fix: set driver_branch"
                f" to {gpu.max_driver_branch}."
            )


def check_cuda_override(
    cuda_version: str, branch: int, conflicts: list[str], warnings: list[str]
) -> None:
    """A system CUDA newer than the branch: same major runs (minor-version compat), else not."""
    max_cuda = DRIVER_BRANCHES[branch].max_cuda
    if version_tuple(cuda_version) <= version_tuple(max_cuda):
        return
    if cuda_version.split(".")[0] == max_cuda.split(".")[0]:
        warnings.append(
            f"system CUDA {cuda_version} is newer than driver branch {branch} (CUDA "
            f"{max_cuda}): it runs through minor-version compatibility only."
        )
        return
    needed = branch_of(CUDA_MIN_DRIVER[cuda_version])
    conflicts.append(
        f"cuda_version {cuda_version} needs driver >= {CUDA_MIN_DRIVER[cuda_version]}; driver"
        f" branch {branch} supports CUDA up to {max_cuda}. Fix: set driver_branch to {needed}"
        " or newer, or lower cuda_version."
    )
