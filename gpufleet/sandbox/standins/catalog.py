"""Which stand-in packages the sandbox repository holds: what ``matrix.resolve`` names, and more.

For each driver branch the matrix is asked for both kernel-module flavours and for a host with
NVSwitches, so the repository holds every name the deploy can ask for: driver metapackages,
pinning package, Fabric Manager, CUDA toolkit, cuDNN and NCCL at the resolved versions, plus
``linux-headers-<kernel>`` for the kernel the sandbox hosts really run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gpufleet import matrix
from gpufleet.matrix.dcgm import (
    DCGM_CORE,
    DCGM_CUDA_MAJORS,
    DCGM_VERSION,
    dcgm_unsupported_reason,
)
from gpufleet.sandbox.standins.driver_tree import driver_packages, fabricmanager_package
from gpufleet.sandbox.standins.model import (
    STANDIN,
    StandinError,
    StandinFile,
    StandinPackage,
    recorded,
    render,
)

# Dependencies of stand-ins that come from the distribution's archive (as for the real
# packages), which the sandbox hosts reach through the apt proxy.
DISTRO_ARCHIVE_DEPENDS = ("lshw",)

# Repository arch folder -> Debian architecture of its packages.
DEB_ARCHES = {"x86_64": "amd64", "sbsa": "arm64"}

# CUDA release -> Debian version of cuda-toolkit-X-Y in NVIDIA's repository (the last update
# of each release; NVIDIA CUDA repository Packages index, see SOURCES.md).
CUDA_DEB_VERSIONS = {
    "12.2": "12.2.2-1",
    "12.3": "12.3.2-1",
    "12.4": "12.4.1-1",
    "12.5": "12.5.1-1",
    "12.6": "12.6.3-1",
    "12.8": "12.8.1-1",
    "12.9": "12.9.1-1",
    "13.0": "13.0.2-1",
}


def repo_os(repo_distro: str) -> tuple[str, str]:
    """The OS of a repository distro folder: ``repo_os("ubuntu2204") == ("ubuntu", "22.04")``."""
    for (os_id, os_version), distro in matrix.NVIDIA_REPO_DISTROS.items():
        if distro == repo_distro:
            return os_id, os_version
    known = ", ".join(matrix.NVIDIA_REPO_DISTROS.values())
    raise StandinError(
        f"repo_distro {repo_distro!r} is not one of {known}. Fix: pass one of those."
    )


def deb_arch(repo_arch: str) -> str:
    """Debian architecture of a repository arch folder: ``deb_arch("x86_64") == "amd64"``."""
    if repo_arch not in DEB_ARCHES:
        raise StandinError(
            f"repo_arch {repo_arch!r} is not one of {', '.join(DEB_ARCHES)}. "
            "Fix: pass one of those."
        )
    return DEB_ARCHES[repo_arch]


def standin_branches(repo_distro: str) -> tuple[int, ...]:
    """The driver branches the stand-in repository carries for a distro: 570 (a branch change
    to test) and the branch a host there gets by default (580; R575 in ubuntu2004, where
    NVIDIA's repository ends). Example: ``standin_branches("ubuntu2004") == (570, 575)``."""
    newest = matrix.REPO_NEWEST_BRANCH.get(repo_distro)
    default = matrix.DEFAULT_DRIVER_BRANCH if newest is None else min(newest, 580)
    return (570, default)


def standin_packages(
    *,
    repo_distro: str,
    repo_arch: str,
    kernel_release: str,
    branches: Sequence[int],
    tf_version: str,
) -> list[StandinPackage]:
    """Every package of the stand-in repository, each once.

    Example::

        names = {p.name for p in standin_packages(repo_distro="ubuntu2204", repo_arch="x86_64",
                 kernel_release="6.1.0-18-amd64", branches=(570, 580), tf_version="2.21.0")}
        # {"nvidia-open-570", "nvidia-open", "nvidia-driver-pinning-580", "libnccl2", ...}
    """
    os_id, os_version = repo_os(repo_distro)
    arch = deb_arch(repo_arch)
    machine = next(m for m, a in matrix.NVIDIA_REPO_ARCHES.items() if a == repo_arch)
    nvswitch = next(g.device_id for g in matrix.GPUS.values() if g.is_nvswitch)
    packages: dict[tuple[str, str], StandinPackage] = {}

    def add(items: Iterable[StandinPackage]) -> None:
        for item in items:
            packages.setdefault((item.name, item.version), item)

    for branch in branches:
        wanted: list[str] = []
        for flavor, gpus in (("open", [nvswitch]), ("proprietary", [])):
            try:
                res = matrix.resolve(
                    tf_version,
                    os_id=os_id,
                    os_version=os_version,
                    arch=machine,
                    driver_branch=branch,
                    kernel_module_flavor=flavor,
                    gpu_device_ids=gpus,
                )
            except matrix.MatrixError as exc:
                raise StandinError(
                    f"the matrix refuses driver branch {branch} with TensorFlow {tf_version} on "
                    f"{repo_distro}: {exc}. Fix: pass branches and tf_version the matrix accepts."
                ) from exc
            wanted += [
                *res.driver_packages,
                res.pinning_package or "",
                res.fabricmanager_package or "",
            ]
            add(cuda_packages(res, arch))
        tree = driver_packages(branch, repo_distro=repo_distro, arch=arch)
        fm_names = {name for name in wanted if name.startswith("nvidia-fabricmanager")}
        tree += [fabricmanager_package(name, branch, arch=arch) for name in sorted(fm_names)]
        built = {p.name for p in tree}
        missing = sorted({_name(spec) for spec in wanted if spec} - built)
        if missing:
            raise StandinError(
                f"the matrix names {', '.join(missing)} for branch {branch}, which the stand-in "
                "driver tree does not build. Fix: add them to "
                "gpufleet/sandbox/standins/driver_tree.py."
            )
        add(tree)
    add([linux_headers(kernel_release, arch)])
    if dcgm_unsupported_reason(repo_distro) is None:
        add(dcgm_packages(arch))
    return list(packages.values())


def _name(spec: str) -> str:
    return spec.split("=", 1)[0]


def _spec(spec: str, fallback_version: str) -> tuple[str, str]:
    name, _, version = spec.partition("=")
    return name, version or fallback_version


def cuda_packages(res: matrix.Resolution, arch: str) -> list[StandinPackage]:
    """CUDA toolkit (with an ``nvcc`` stand-in where its real output is recorded), cuDNN, NCCL."""
    cuda = res.cuda
    dashed = cuda.replace(".", "-")
    toolkit, toolkit_version = _spec(
        res.cuda_toolkit_package, CUDA_DEB_VERSIONS.get(cuda, f"{cuda}.0-1")
    )
    nvcc_name = f"cuda-nvcc-{dashed}"
    prefix = f"/usr/local/cuda-{cuda}"
    nvcc_text = recorded(f"nvcc_{cuda}")
    # The prefix always exists: update-alternatives refuses a missing alternative path.
    readme = f"{STANDIN}: CUDA {cuda} toolkit directory; no CUDA library or compiler here.\n"
    files = [StandinFile(f"{prefix}/README.gpufleet-standin", readme)]
    if nvcc_text is not None:
        script = render("nvcc.sh", CUDA_VERSION=cuda, RECORDED_VERSION=nvcc_text.rstrip("\n"))
        files.append(StandinFile(f"{prefix}/bin/nvcc", script, 0o755))
    # Like the real toolkit, register /usr/local/cuda as an alternative pointing at this release.
    priority = "".join(cuda.split("."))
    out = [
        StandinPackage(
            nvcc_name,
            toolkit_version,
            arch,
            f"CUDA nvcc {cuda}",
            files=tuple(files),
            postinst=f"update-alternatives --install /usr/local/cuda cuda {prefix} {priority}\n",
            prerm=f'[ "$1" = upgrade ] || update-alternatives --remove cuda {prefix}\n',
        ),
        StandinPackage(
            toolkit,
            toolkit_version,
            arch,
            f"CUDA Toolkit {cuda} meta-package",
            depends=(f"{nvcc_name} (>= {toolkit_version})",),
        ),
    ]
    out += _runtime_and_dev(
        res.cudnn_packages, "cuDNN runtime libraries", "cuDNN development headers", arch
    )
    out += _runtime_and_dev(
        res.nccl_packages,
        "NVIDIA Collective Communication Library (NCCL) Runtime",
        "NVIDIA Collective Communication Library (NCCL) Development Files",
        arch,
    )
    return out


def _runtime_and_dev(
    specs: Sequence[str], runtime: str, dev: str, arch: str
) -> list[StandinPackage]:
    """A runtime package and its ``-dev`` package, the latter depending on the exact runtime."""
    if len(specs) != 2 or not all("=" in spec for spec in specs):
        raise StandinError(
            f"expected a pinned runtime and dev package from the matrix, got {list(specs)}. Fix: "
            "give the versions in gpufleet/matrix/apt_names.py so the stand-ins carry them."
        )
    (run_name, run_version), (dev_name, dev_version) = (_spec(s, "") for s in specs)
    return [
        StandinPackage(run_name, run_version, arch, runtime),
        StandinPackage(
            dev_name, dev_version, arch, dev, depends=(f"{run_name} (= {run_version})",)
        ),
    ]


def linux_headers(kernel_release: str, arch: str) -> StandinPackage:
    """``linux-headers-<kernel_release>``: the sandbox hosts run this machine's kernel.

    No archive has headers for it, and the deploy installs the running kernel's headers before
    the driver, as NVIDIA's guide says. Example: ``linux_headers("6.1.0-18-amd64", "amd64")``.
    """
    numeric = re.match(r"\d+(\.\d+)*", kernel_release)
    if numeric is None:
        raise StandinError(
            f"kernel_release {kernel_release!r} does not start with a version number like 6.1.0."
            " Fix: pass `uname -r` of the machine that runs the sandbox."
        )
    name = f"linux-headers-{kernel_release.lower()}"
    readme = (
        f"{STANDIN}: headers of kernel {kernel_release} are not here. The sandbox hosts run\n"
        "the machine's own kernel and the stand-in NVIDIA packages build no module against it.\n"
    )
    return StandinPackage(
        name,
        f"{numeric.group(0)}-1",
        arch,
        f"Header files related to Linux kernel {kernel_release}",
        section="kernel",
        files=(StandinFile(f"/usr/src/{name}/README.gpufleet-standin", readme),),
        symlinks=((f"/lib/modules/{kernel_release}/build", f"/usr/src/{name}"),),
    )


def dcgm_packages(arch: str, version: str = DCGM_VERSION) -> list[StandinPackage]:
    """DCGM 4: ``-core`` (``nv-hostengine``, ``dcgmi``, ``nvidia-dcgm.service``; it depends on
    lshw, as the real one does) and one ``-cuda<major>`` package per CUDA major, each depending
    on the exact ``-core`` (DCGM's cmake/packaging.cmake; see SOURCES.md)."""
    upstream = version.split(":", 1)[-1].split("-", 1)[0]
    hostengine = render("nv-hostengine.sh", DCGM_VERSION=upstream)
    core = StandinPackage(
        DCGM_CORE,
        version,
        arch,
        "NVIDIA Datacenter GPU Management Tools (core)",
        depends=("lshw",),
        files=(
            StandinFile("/usr/bin/nv-hostengine", hostengine, 0o755),
            StandinFile("/usr/bin/dcgmi", render("dcgmi.sh", DCGM_VERSION=upstream), 0o755),
            StandinFile(
                "/lib/systemd/system/nvidia-dcgm.service",
                render("nvidia-dcgm.service", DCGM_VERSION=upstream),
            ),
        ),
    )
    return [
        core,
        *(
            StandinPackage(
                f"datacenter-gpu-manager-4-cuda{major}",
                version,
                arch,
                f"NVIDIA Datacenter GPU Management Tools (CUDA {major} diagnostics)",
                depends=(f"{DCGM_CORE} (= {version})",),
            )
            for major in DCGM_CUDA_MAJORS
        ),
    ]
