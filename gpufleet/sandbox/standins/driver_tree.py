"""The driver sub-packages under the recorded metapackages of one branch, and stand-in files.

The metapackages (``nvidia-open-570``, ``cuda-drivers-580``, ``nvidia-open``, the pinning
package, Fabric Manager) come from the repository record (gpufleet/matrix/record); what they
depend on is built here with the names of NVIDIA's packaging: ``nvidia-driver-<b>[-open]``,
its DKMS, kernel-source and kernel-common packages, the compute library package,
``nvidia-utils-<b>`` (``/usr/bin/nvidia-smi``) and ``nvidia-compute-utils-<b>``
(``nvidia-persistenced`` and its unit). Branch-suffixed sub-packages provide, conflict with
and replace their unsuffixed name, so a branch change replaces the old branch's packages
instead of installing both. Sources: SOURCES.md beside this file.
"""

from __future__ import annotations

from gpufleet.matrix.drivers import DRIVER_BRANCHES
from gpufleet.sandbox.standins.model import STANDIN, StandinFile, StandinPackage, render


def driver_packages(branch: int, *, version: str, arch: str) -> list[StandinPackage]:
    """The sub-packages of ``branch`` at the recorded driver ``version`` (both flavours).

    Example: ``{p.name for p in driver_packages(570, version="570.172.08-0ubuntu1",
    arch="amd64")}`` contains ``nvidia-driver-570-open`` and ``nvidia-utils-570``.
    """
    info = DRIVER_BRANCHES[branch]
    driver = version.split(":", 1)[-1].rsplit("-", 1)[0]
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
    return packages


def pinning_files(branch: int) -> tuple[StandinFile, ...]:
    """What ``nvidia-driver-pinning-<branch>`` installs: an apt preferences file (its exact
    text is not published; the stand-in pins the branch at priority 1000)."""
    prefs = render("nvidia-driver-pinning.txt", BRANCH=str(branch))
    return (StandinFile(f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}", prefs),)


def fabricmanager_files(version: str) -> tuple[StandinFile, ...]:
    """Fabric Manager's stand-in files: ``nv-fabricmanager``, its unit and config."""
    driver = version.split(":", 1)[-1].rsplit("-", 1)[0]
    daemon = render("nv-fabricmanager.sh", DRIVER_VERSION=driver)
    unit = render("nvidia-fabricmanager.service", DRIVER_VERSION=driver)
    config = f"# {STANDIN}: Fabric Manager {driver} has no NVSwitch to configure here.\n"
    return (
        StandinFile("/usr/bin/nv-fabricmanager", daemon, 0o755),
        StandinFile("/lib/systemd/system/nvidia-fabricmanager.service", unit),
        StandinFile("/usr/share/nvidia/nvswitch/fabricmanager.cfg", config),
    )
