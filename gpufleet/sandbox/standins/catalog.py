"""Which stand-in packages the sandbox repository holds: the record of NVIDIA's real repository.

Every stanza of gpufleet/matrix/record/nvidia_repos.json for the repository (``<distro>/<arch>``)
becomes a stand-in with the recorded name, version, Provides, Depends, Conflicts and Replaces,
for the driver branches the sandbox carries and every package of no branch (CUDA, cuDNN, NCCL,
DCGM, NVLSM). The resolver's output plays no part: a name it gets wrong is not in the stand-in
repository either, and apt says so as it would on a real host. What the recorded metapackages
depend on is built by ``driver_tree``; ``linux-headers-<kernel>`` for the kernel the sandbox
hosts really run is added.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpufleet import matrix
from gpufleet.matrix.dcgm import DCGM_CORE
from gpufleet.matrix.drivers import DRIVER_BRANCHES
from gpufleet.matrix.repo_record import RecordedPackage, record, repository
from gpufleet.sandbox.standins.driver_tree import (
    driver_packages,
    fabricmanager_files,
    pinning_files,
)
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
# Recorded dependencies on the distribution's archive that the stand-ins leave out on purpose:
# nvlsm's compiler and InfiniBand library (nothing of it runs on a sandbox host).
DROPPED_DISTRO_DEPENDS = frozenset(
    {"build-essential", "libgcc1", "libc6", "libstdc++6", "libibumad3"}
)

# Repository arch folder -> Debian architecture of its packages.
DEB_ARCHES = {"x86_64": "amd64", "sbsa": "arm64"}


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
    """Every package of the stand-in repository, each once, from the record.

    ``tf_version`` must be a release the matrix knows (the sandbox installs it); every CUDA,
    cuDNN and NCCL build recorded for the repository is served, as NVIDIA's repository does.

    Example::

        names = {p.name for p in standin_packages(repo_distro="ubuntu2204", repo_arch="x86_64",
                 kernel_release="6.1.0-18-amd64", branches=(570, 580), tf_version="2.21.0")}
        # {"nvidia-open-570", "nvidia-open", "nvidia-fabricmanager", "libnccl2", ...}
    """
    repo_os(repo_distro)
    arch = deb_arch(repo_arch)
    if tf_version not in matrix.TF_RELEASES:
        raise StandinError(
            f"the matrix refuses TensorFlow {tf_version!r}: {matrix.unknown_tf_message(tf_version)}"
        )
    repo = repository(repo_distro, repo_arch)
    recorded = [p for p in record().packages(repo) if p.branch is None or p.branch in branches]
    for branch in branches:
        if not any(p.branch == branch for p in recorded):
            raise StandinError(
                f"the record of NVIDIA's {repo} repository has no driver packages of branch "
                f"{branch}. Fix: pass branches it records ({_recorded_branches(repo)})."
            )
    packages: dict[tuple[str, str], StandinPackage] = {}
    for item in [*(_from_record(p, arch) for p in recorded), linux_headers(kernel_release, arch)]:
        packages.setdefault((item.name, item.version), item)
    for branch in branches:
        if not DRIVER_BRANCHES[branch].names_have_branch:
            continue
        for version in _branch_versions(recorded, branch):
            for item in driver_packages(branch, version=version, arch=arch):
                packages.setdefault((item.name, item.version), item)
    out = list(packages.values())
    _check_dependencies(out, repo)
    return out


def _recorded_branches(repo: str) -> str:
    return ", ".join(sorted({str(p.branch) for p in record().packages(repo) if p.branch}))


def _branch_versions(recorded: Sequence[RecordedPackage], branch: int) -> list[str]:
    """Each recorded version of the branch's driver metapackages (one sub-package tree each,
    as NVIDIA's repository keeps every release of a branch)."""
    versions = {
        p.version
        for p in recorded
        if p.branch == branch and p.package.startswith(("cuda-drivers", "nvidia-open"))
    }
    return sorted(versions)


def _relations(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _from_record(p: RecordedPackage, arch: str) -> StandinPackage:
    """A stand-in with the recorded fields, and the files its real package's role needs."""
    depends = tuple(
        group
        for group in _relations(p.field("Depends"))
        if group.split(" ", 1)[0] not in DROPPED_DISTRO_DEPENDS
    )
    files: tuple[StandinFile, ...] = ()
    postinst = prerm = ""
    pkg_arch = arch
    if p.package.startswith("nvidia-driver-pinning-") and p.branch:
        files, pkg_arch = pinning_files(p.branch), "all"
    elif p.package.startswith("nvidia-fabricmanager"):
        files = fabricmanager_files(p.version)
    elif p.package.startswith("cuda-nvcc-"):
        files, postinst, prerm = nvcc_payload(p.package.removeprefix("cuda-nvcc-"))
    elif p.package == DCGM_CORE:
        files = dcgm_core_files(p.version)
    return StandinPackage(
        p.package,
        p.version,
        pkg_arch,
        f"{p.package} (recorded from NVIDIA's {p.repository} repository)",
        depends=depends,
        provides=_relations(p.field("Provides")),
        conflicts=_relations(p.field("Conflicts")),
        replaces=_relations(p.field("Replaces")),
        files=files,
        postinst=postinst,
        prerm=prerm,
    )


def _check_dependencies(packages: Sequence[StandinPackage], repo: str) -> None:
    """Every Depends group must be satisfiable inside the stand-in repository (or from the
    distribution's archive, for the few names in DISTRO_ARCHIVE_DEPENDS)."""
    provided = {p.name for p in packages} | {v for p in packages for v in p.provides}
    provided |= set(DISTRO_ARCHIVE_DEPENDS)
    for package in packages:
        for group in package.depends:
            names = [alt.strip().split(" ", 1)[0] for alt in group.split("|")]
            if not any(name in provided for name in names):
                raise StandinError(
                    f"{package.name} {package.version} depends on {group}, which the record of "
                    f"{repo} does not have. Fix: record it (gpufleet/matrix/record) with its "
                    "source, or its sub-packages in gpufleet/sandbox/standins/driver_tree.py."
                )


def nvcc_payload(dashed: str) -> tuple[tuple[StandinFile, ...], str, str]:
    """``cuda-nvcc-X-Y``'s stand-in files (an ``nvcc`` where its real output is recorded) and
    the update-alternatives scripts that register ``/usr/local/cuda`` like the real toolkit."""
    cuda = dashed.replace("-", ".")
    prefix = f"/usr/local/cuda-{cuda}"
    nvcc_text = recorded(f"nvcc_{cuda}")
    # The prefix always exists: update-alternatives refuses a missing alternative path.
    readme = f"{STANDIN}: CUDA {cuda} toolkit directory; no CUDA library or compiler here.\n"
    files = [StandinFile(f"{prefix}/README.gpufleet-standin", readme)]
    if nvcc_text is not None:
        script = render("nvcc.sh", CUDA_VERSION=cuda, RECORDED_VERSION=nvcc_text.rstrip("\n"))
        files.append(StandinFile(f"{prefix}/bin/nvcc", script, 0o755))
    priority = "".join(cuda.split("."))
    postinst = f"update-alternatives --install /usr/local/cuda cuda {prefix} {priority}\n"
    prerm = f'[ "$1" = upgrade ] || update-alternatives --remove cuda {prefix}\n'
    return tuple(files), postinst, prerm


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


def dcgm_core_files(version: str) -> tuple[StandinFile, ...]:
    """DCGM 4 ``-core``'s stand-in files: ``nv-hostengine``, ``dcgmi``, ``nvidia-dcgm.service``
    (DCGM's cmake/packaging.cmake and config-files; see SOURCES.md)."""
    upstream = version.split(":", 1)[-1].split("-", 1)[0]
    return (
        StandinFile(
            "/usr/bin/nv-hostengine", render("nv-hostengine.sh", DCGM_VERSION=upstream), 0o755
        ),
        StandinFile("/usr/bin/dcgmi", render("dcgmi.sh", DCGM_VERSION=upstream), 0o755),
        StandinFile(
            "/lib/systemd/system/nvidia-dcgm.service",
            render("nvidia-dcgm.service", DCGM_VERSION=upstream),
        ),
    )
