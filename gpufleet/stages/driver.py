"""The NVIDIA driver: headers and DKMS, nouveau out, the resolved branch installed and locked."""

from __future__ import annotations

import re
import shlex

from pyinfra.api import deploy
from pyinfra.operations import server, systemd

from gpufleet.matrix.apt_names import NVLSM_PACKAGE
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import dkms, kernel
from gpufleet.operations import files as gpufleet_files
from gpufleet.stages import fleet_cache, foreign, op_keys
from gpufleet.stages.fabric import fabric_packages, wants_fabric_manager
from gpufleet.stages.host_config import DISTRO_DRIVER_BLOCK, DRIVER_PREFERENCES, NOUVEAU_BLACKLIST
from gpufleet.stages.host_probe import DRIVER_MARKER, branch_of_package_version
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.stages.preflight import foreign_driver
from gpufleet.templates import render

# The Origin field of each distribution's archive (its Release file).
ARCHIVE_ORIGINS = {"ubuntu": "Ubuntu", "debian": "Debian"}
UNATTENDED_UPGRADES = "/etc/apt/apt.conf.d/51gpufleet-unattended-upgrades"
DKMS_MOK = "/etc/dkms/framework.conf.d/gpufleet-mok.conf"
# Package name prefixes unattended-upgrades must never touch (DESIGN.md, decision 2).
UPGRADE_BLACKLIST = ("nvidia-", "libnvidia-", "cuda-", "libcudnn", "libnccl")
# Kernel each Ubuntu LTS shipped with; a newer generic kernel there is a HWE kernel, whose
# headers metapackage carries the release (linux-headers-generic-hwe-22.04).
UBUNTU_GA_KERNELS = {"20.04": "5.4", "22.04": "5.15", "24.04": "6.8"}


def headers_packages(os_id: str, os_version: str, kernel_release: str, wanted: str) -> list[str]:
    """Headers of the running kernel and the metapackage that keeps them coming.

    Example: ``headers_packages("ubuntu", "22.04", "5.15.0-91-generic", "auto")
    == ["linux-headers-5.15.0-91-generic", "linux-headers-generic"]``
    """
    packages = [f"linux-headers-{kernel_release}"]
    if wanted != "auto":
        return [*packages, wanted]
    match = re.match(r"^(\d+)\.(\d+)\.\d+-[\d.]+-(.+)$", kernel_release)
    if not match:
        return packages
    series, flavour = f"{match.group(1)}.{match.group(2)}", match.group(3)
    ga = UBUNTU_GA_KERNELS.get(os_version)
    if os_id == "ubuntu" and flavour == "generic" and ga and series != ga:
        return [*packages, f"linux-headers-generic-hwe-{os_version}"]
    return [*packages, f"linux-headers-{flavour}"]


@deploy("gpufleet driver")
def driver(plan: NodePlan | None = None):
    """
    Install and lock the NVIDIA driver the plan resolved: kernel headers and DKMS, nouveau
    blacklisted, any other branch (or, if allowed, a foreign driver) removed first, the
    branch pinned, unattended-upgrades kept off, persistenced and Fabric Manager running
    (the reboot the driver needs comes at the end of the run: ``run_end``).

    .. code:: python

        driver()
    """
    plan = plan or node_plan()
    spec, host_state, resolution = plan.spec, plan.state, plan.require_resolution()
    branch = resolution.driver_branch

    fleet_cache.install(
        plan,
        name="kernel headers and DKMS",
        packages=[
            "dkms",
            *headers_packages(
                host_state.os_id,
                host_state.os_version,
                host_state.kernel,
                spec.kernel_headers_package,
            ),
        ],
    )
    if spec.secure_boot_plan == "mok":
        gpufleet_files.content(
            name=f"{DKMS_MOK}: DKMS signs modules with the MOK",
            path=DKMS_MOK,
            text=render("dkms-mok.conf.j2", key=spec.mok_key_path, cert=spec.mok_cert_path),
        )
    kernel.blacklist_module(
        name=f"{NOUVEAU_BLACKLIST}: nouveau blacklisted (initramfs rebuilt on change)",
        module="nouveau",
        path=NOUVEAU_BLACKLIST,
    )
    # A blacklist stops nouveau's aliases only: a modules-load.d name, an install, softdep or
    # alias line still loads it (and reboot: auto would reboot on every deploy for it).
    foreign.repair(plan, "nouveau")
    gpufleet_files.content(
        name=f"{DISTRO_DRIVER_BLOCK}: distro builds of the NVIDIA driver blocked "
        "(NVIDIA's repository only)",
        path=DISTRO_DRIVER_BLOCK,
        text=render("distro-nvidia-driver.pref.j2", origin=ARCHIVE_ORIGINS[host_state.os_id]),
    )
    _remove_other_drivers(plan)
    _lock_branch(plan)
    foreign.repair(plan, "apt-pin")  # another pin of NVIDIA's packages beside the lock

    fabric = fabric_packages(plan) if wants_fabric_manager(plan) else []
    packages = [*resolution.driver_packages, *fabric]
    # One apt transaction for driver and fabric packages: all resolve to the same version of
    # the locked branch, as Fabric Manager requires.
    fleet_cache.install(
        plan,
        name="NVIDIA driver packages of the locked branch",
        packages=packages,
        allow_change=True,
        hold=resolution.pinning_package is None,  # held by the command that installs them
    )
    _module_for_running_kernel(plan)
    # Fabric Manager, NSCQ and NVSDM must match the driver to the last digit (NVIDIA's driver
    # container installs each at =${DRIVER_VERSION}*); NVLSM has one version for every branch.
    reference = resolution.driver_packages[0]
    for package in op_keys.each(p for p in fabric if p != NVLSM_PACKAGE):
        gpufleet_apt.same_version_as(
            name=f"{package} at the driver's exact version", package=package, reference=reference
        )
    # Hold the real packages only (never a virtual name such as nvidia-fabricmanager-580):
    # the driver's when no pinning package locks the branch, the fabric packages always, as
    # NVIDIA's driver container does (apt-mark hold nvidia-fabricmanager libnvidia-nscq).
    held = fabric if resolution.pinning_package else packages
    on_hold = sorted(host_state.held)  # read by the probe: no round trip per package
    for package in op_keys.each(p.split("=", 1)[0] for p in held):
        gpufleet_apt.held(name=f"{package} held", package=package, on_hold=on_hold)
    gpufleet_files.content(
        name=f"{DRIVER_MARKER}: driver branch recorded",
        path=DRIVER_MARKER,
        text=f"{branch}\n",
    )
    gpufleet_files.content(
        name=f"{UNATTENDED_UPGRADES}: unattended-upgrades leaves NVIDIA, CUDA, cuDNN, NCCL alone",
        path=UNATTENDED_UPGRADES,
        text=render("unattended-upgrades-nvidia.conf.j2", prefixes=UPGRADE_BLACKLIST),
    )
    # The reboot comes last in the run (gpufleet.stages.run_end). When one is predicted
    # (nouveau loaded, or another branch's module running) the new driver cannot load yet:
    # enable the services; the reboot (or, under 'never', the operator's) starts them.
    start = not _reboot_predicted(plan)
    if spec.persistenced:  # hosts without GPUs set persistenced: False (it has none to keep)
        _service("nvidia-persistenced", start=start)
    if fabric:
        why = " (NVLink 5: NVLSM too)" if resolution.nvlink5 else " (NVSwitch)"
        _service("nvidia-fabricmanager", start=start, why=why)


def _service(unit: str, *, start: bool, why: str = "") -> None:
    """Enabled and running as two operations, so a plan tells which of the two is missing."""
    systemd.service(name=f"{unit} enabled{why}", service=unit, running=None, enabled=True)
    if start:
        systemd.service(name=f"{unit} running{why}", service=unit, running=True)


def _module_for_running_kernel(plan: NodePlan) -> None:
    """The branch installed before this run, yet no module of it for the kernel that runs
    (a kernel update whose DKMS build failed): build it, or fail saying why. The probe's
    ``installed_module`` is a stamp input, so a stamp never outlives the module."""
    state, resolution = plan.state, plan.require_resolution()
    branch = resolution.driver_branch
    if plan.spec.gpu_less:
        return  # no GPU to drive: a module would never load (and a container cannot build one)
    installed = [state.packages.get(name.split("=", 1)[0]) for name in resolution.driver_packages]
    if not all(v and branch_of_package_version(v) == branch for v in installed):
        return  # installed by this run: the package's own DKMS hook builds the module
    if dkms.module_missing(state.installed_module, branch):
        dkms.module_built(
            name=f"NVIDIA {branch} module built for the running kernel {state.kernel} (DKMS)",
            kernel_release=state.kernel,
            branch=branch,
            load=not (state.loaded_driver or state.nouveau_loaded),
        )


def _reboot_predicted(plan: NodePlan) -> bool:
    """Whether the host will need a reboot to run the resolved branch (from the probe)."""
    loaded = plan.state.loaded_driver
    branch = plan.require_resolution().driver_branch
    return plan.state.nouveau_loaded or bool(loaded and not loaded.startswith(f"{branch}."))


def _remove_other_drivers(plan: NodePlan) -> None:
    """Purge another branch (or an allowed foreign driver) before installing, so apt never
    meets two branches at once ("held broken packages")."""
    host_state, branch = plan.state, plan.require_resolution().driver_branch
    if plan.spec.replace_foreign_driver and host_state.runfile_uninstaller and foreign_driver(plan):
        server.shell(
            name="uninstall the runfile driver",
            # The path is the host's answer to the probe: quoted, as any value from outside.
            commands=[f"{shlex.quote(host_state.runfile_uninstaller)} --silent"],
        )
    replace_all = plan.spec.replace_foreign_driver and foreign_driver(plan) is not None
    old = sorted(host_state.packages) if replace_all else host_state.other_branch_packages(branch)
    if old:
        gpufleet_apt.remove(
            name="remove the previous driver (another branch or a foreign one)",
            packages=old,
        )


def _lock_branch(plan: NodePlan) -> None:
    """NVIDIA's pinning package where the branch has one, else an apt preferences file."""
    resolution = plan.require_resolution()
    branch = resolution.driver_branch
    if resolution.pinning_package:
        gpufleet_files.content(
            name=f"{DRIVER_PREFERENCES}: absent (NVIDIA's pinning package locks the branch)",
            path=DRIVER_PREFERENCES,
            text="",
            present=False,
        )
        fleet_cache.install(
            plan,
            name="lock the branch: NVIDIA's pinning package",
            packages=[resolution.pinning_package],
            allow_change=True,
        )
        return
    gpufleet_files.content(
        name=f"{DRIVER_PREFERENCES}: driver branch locked by apt preferences",
        path=DRIVER_PREFERENCES,
        text=render("nvidia-driver.pref.j2", branch=branch),
    )
