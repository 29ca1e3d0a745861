"""The stand-in NVIDIA driver packages of one branch, with the dependency tree of the real ones.

Installing ``nvidia-open-570`` or ``cuda-drivers-570`` (or, from R580, ``nvidia-open`` /
``cuda-drivers`` after ``nvidia-driver-pinning-580``) pulls the same-named sub-packages as on a
real host: the driver metapackage, its DKMS, kernel-source and kernel-common packages, the
compute library package, ``nvidia-utils-<branch>`` (``/usr/bin/nvidia-smi``) and
``nvidia-compute-utils-<branch>`` (``nvidia-persistenced`` and its unit). Branch-suffixed
packages provide, conflict with and replace their unsuffixed name, so a branch change replaces
the old branch's packages instead of installing both. Sources: SOURCES.md beside this file.
"""

from __future__ import annotations

from gpufleet.matrix.drivers import DRIVER_BRANCHES
from gpufleet.sandbox.standins.model import STANDIN, StandinFile, StandinPackage, render


def driver_revision(repo_distro: str) -> str:
    """Debian revision of driver packages: ``-0ubuntu1`` in the Ubuntu repos, ``-1`` elsewhere."""
    return "-0ubuntu1" if repo_distro.startswith("ubuntu") else "-1"


def driver_packages(branch: int, *, repo_distro: str, arch: str) -> list[StandinPackage]:
    """Every stand-in driver package of ``branch``, open and proprietary flavours.

    Example: ``{p.name for p in driver_packages(570, repo_distro="ubuntu2204", arch="amd64")}``
    contains ``nvidia-open-570``, ``cuda-drivers-570`` and ``nvidia-utils-570``.
    """
    info = DRIVER_BRANCHES[branch]
    driver = info.latest
    version = driver + driver_revision(repo_distro)
    sfx = f"-{branch}" if info.names_have_branch else ""
    values = {
        "DRIVER_VERSION": driver,
        "NVML_VERSION": ".".join(driver.split(".")[:2]),
        "CUDA_VERSION": info.max_cuda,
        "BRANCH": str(branch),
    }

    def pkg(
        base: str,
        summary: str,
        *deps: str,
        files: tuple[StandinFile, ...] = (),
        swap_unsuffixed: bool = True,
        conflicts: tuple[str, ...] = (),
    ) -> StandinPackage:
        # A branch-suffixed sub-package stands for its unsuffixed name (one branch at a time);
        # not the metapackages, whose unsuffixed names are real packages of their own.
        name = base.replace("@", sfx)
        virtual = base.replace("@", "") if sfx and swap_unsuffixed else ""
        swap = (virtual,) if virtual else ()
        pinned = tuple(f"{dep.replace('@', sfx)} (= {version})" for dep in deps)
        return StandinPackage(
            name,
            version,
            arch,
            summary,
            depends=pinned,
            provides=swap,
            conflicts=swap + tuple(c.replace("@", sfx) for c in conflicts),
            replaces=swap,
            files=files,
        )

    smi = render("nvidia-smi.sh", PACKAGE=f"nvidia-utils{sfx}", **values)
    persistenced = render("nvidia-persistenced.sh", **values)
    unit = render("nvidia-persistenced.service", **values)
    packages = [
        pkg("libnvidia-compute@", "NVIDIA libcompute package"),
        pkg("nvidia-kernel-common@", "Shared files used with the kernel module"),
        pkg("nvidia-kernel-source@", "NVIDIA kernel source package"),
        pkg("nvidia-kernel-source@-open", "NVIDIA kernel source package (open kernel modules)"),
        # The real DKMS packages depend on Ubuntu's `dkms`, which pulls a compiler; the
        # stand-ins have no module to build, so they leave `dkms` out on purpose.
        # Open and proprietary kernel modules exclude each other.
        pkg(
            "nvidia-dkms@",
            "NVIDIA DKMS package",
            "nvidia-kernel-common@",
            "nvidia-kernel-source@",
            conflicts=("nvidia-dkms@-open",),
        ),
        pkg(
            "nvidia-dkms@-open",
            "NVIDIA DKMS package (open kernel modules)",
            "nvidia-kernel-common@",
            "nvidia-kernel-source@-open",
            conflicts=("nvidia-dkms@",),
        ),
        pkg(
            "nvidia-utils@",
            "NVIDIA driver support binaries",
            "libnvidia-compute@",
            files=(StandinFile("/usr/bin/nvidia-smi", smi, 0o755),),
        ),
        pkg(
            "nvidia-compute-utils@",
            "NVIDIA compute utilities",
            "libnvidia-compute@",
            files=(
                StandinFile("/usr/bin/nvidia-persistenced", persistenced, 0o755),
                StandinFile("/lib/systemd/system/nvidia-persistenced.service", unit),
            ),
        ),
    ]
    common = (
        "nvidia-kernel-common@",
        "libnvidia-compute@",
        "nvidia-utils@",
        "nvidia-compute-utils@",
    )
    packages += [
        pkg(
            "nvidia-driver@",
            "NVIDIA driver metapackage",
            "nvidia-dkms@",
            *common,
            swap_unsuffixed=False,
        ),
        pkg(
            "nvidia-driver@-open",
            "NVIDIA driver (open kernel modules) metapackage",
            "nvidia-dkms@-open",
            *common,
            swap_unsuffixed=False,
        ),
    ]
    if sfx:
        packages += [
            pkg(
                "nvidia-open@",
                "NVIDIA open kernel module driver metapackage",
                "nvidia-driver@-open",
                swap_unsuffixed=False,
            ),
            pkg(
                "cuda-drivers@",
                "CUDA Driver meta-package, branch-specific",
                "nvidia-driver@",
                swap_unsuffixed=False,
            ),
        ]
    if info.has_pinning_package:
        # From R580 the guide installs the unsuffixed metapackages after the pinning package.
        open_dep, cuda_dep = (
            ("nvidia-open@", "cuda-drivers@") if sfx else ("nvidia-driver-open", "nvidia-driver")
        )
        packages += [
            _unsuffixed(
                "nvidia-open",
                version,
                arch,
                "NVIDIA open kernel module driver metapackage",
                open_dep.replace("@", sfx),
            ),
            _unsuffixed(
                "cuda-drivers",
                version,
                arch,
                "CUDA Driver meta-package",
                cuda_dep.replace("@", sfx),
            ),
            pinning_package(branch, repo_distro=repo_distro),
        ]
    return packages


def _unsuffixed(name: str, version: str, arch: str, summary: str, dep: str) -> StandinPackage:
    return StandinPackage(name, version, arch, summary, depends=(f"{dep} (= {version})",))


def pinning_package(branch: int, *, repo_distro: str) -> StandinPackage:
    """``nvidia-driver-pinning-<branch>``: an apt preferences file holding the branch."""
    version = f"{branch}{'-1ubuntu1' if repo_distro.startswith('ubuntu') else '-1'}"
    prefs = render("nvidia-driver-pinning.txt", BRANCH=str(branch))
    return StandinPackage(
        f"nvidia-driver-pinning-{branch}",
        version,
        "all",
        f"APT driver pinning file for driver branch {branch}",
        provides=("nvidia-driver-pinning",),
        conflicts=("nvidia-driver-pinning",),
        replaces=("nvidia-driver-pinning",),
        files=(StandinFile(f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}", prefs),),
    )


def fabricmanager_package(name: str, branch: int, *, arch: str) -> StandinPackage:
    """Fabric Manager stand-in: ``nv-fabricmanager`` and ``nvidia-fabricmanager.service``."""
    driver = DRIVER_BRANCHES[branch].latest
    daemon = render("nv-fabricmanager.sh", DRIVER_VERSION=driver)
    unit = render("nvidia-fabricmanager.service", DRIVER_VERSION=driver)
    config = f"# {STANDIN}: Fabric Manager {driver} has no NVSwitch to configure here.\n"
    virtual = ("nvidia-fabricmanager",) if name != "nvidia-fabricmanager" else ()
    return StandinPackage(
        name,
        f"{driver}-1",
        arch,
        "Fabric Manager for NVSwitch based systems",
        provides=virtual,
        conflicts=virtual,
        replaces=virtual,
        files=(
            StandinFile("/usr/bin/nv-fabricmanager", daemon, 0o755),
            StandinFile("/lib/systemd/system/nvidia-fabricmanager.service", unit),
            StandinFile("/usr/share/nvidia/nvswitch/fabricmanager.cfg", config),
        ),
    )
