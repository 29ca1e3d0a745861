"""Preflight: refuse, before anything changes, a host that cannot be provisioned safely."""

from __future__ import annotations

from collections import Counter

from pyinfra import host, logger, state
from pyinfra.api import deploy
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import ctx_host

from gpufleet import matrix
from gpufleet.matrix import GpuModel, gpu_by_device_id
from gpufleet.matrix.dcgm import DCGM_VERSION
from gpufleet.matrix.os_python import venv_python_conflict
from gpufleet.operations.kernel import reboot_pending, reboot_reason
from gpufleet.stages import foreign
from gpufleet.stages.dcgm import skip_reason as dcgm_skip_reason
from gpufleet.stages.fabric import fabric_packages, wants_fabric_manager
from gpufleet.stages.inventory_error import cli_error
from gpufleet.stages.nccl_tests import skip_reason as nccl_tests_skip_reason
from gpufleet.stages.node import NodePlan, disk_paths, node_plan
from gpufleet.text import plain


@deploy("gpufleet preflight")
def preflight(plan: NodePlan | None = None) -> bool:
    """
    Check the host and refuse it (mark it failed, change nothing) when it is unsafe to
    provision; other hosts carry on. Returns whether the host passed.

    .. code:: python

        if preflight():
            nvidia_repo()
    """
    plan = plan or node_plan()
    found = refusals(plan)
    if not found:
        announce(plan)
        return True
    for reason in found:
        logger.error(f"{host.print_prefix}gpufleet preflight refused this host: {plain(reason)}")
    # Failing the host while planning removes it from the run before any operation executes;
    # pyinfra then reports it under failed hosts and exits non-zero.
    # (the Host object itself, not pyinfra's context proxy, which later points at other hosts).
    try:
        state.fail_hosts({ctx_host.get()})
    except PyinfraError as exc:  # the last host refused: pyinfra stops the run here
        why = "the last one refused by gpufleet preflight; each host's reason is above"
        raise cli_error(PyinfraError, f"{exc} ({why})") from None
    return False


def announce(plan: NodePlan, unchanged: str = "") -> None:
    """Log the host's plan line and the resolution's warnings (``unchanged``: why nothing
    else is planned, for a host whose deploy stamp held)."""
    # plain(): the plan quotes the host's os-release, which must not reach the terminal raw.
    logger.info(f"{host.print_prefix}gpufleet plan: {plain(describe(plan))}{unchanged}")
    for warning in plan.require_resolution().warnings:
        logger.warning(f"{host.print_prefix}gpufleet: {plain(warning)}")
    # What others configured that the deploy leaves to them: said on every run (gpufleet drift
    # counts these lines as drift), a stamped one too.
    for sentence in foreign.reported(plan):
        logger.warning(f"{host.print_prefix}{foreign.DRIFT_PREFIX}{plain(sentence)}")
    # A stamp holds for a host whose reboot the policy leaves to the operator (review finding
    # 13): the run that stamped it said so, and so must every run the stamp spares.
    reason = probed_reboot_reason(plan) if unchanged and plan.spec.reboot == "never" else None
    if reason:
        logger.warning(f"{host.print_prefix}{reboot_pending(plain(reason))}")


def probed_reboot_reason(plan: NodePlan) -> str | None:
    """Why the host's running kernel cannot use its installed driver, from the probe (the
    question ``reboot_for_driver`` asks when it runs)."""
    state = plan.state
    return reboot_reason(
        {
            "nouveau": state.nouveau_loaded,
            "loaded": state.loaded_driver,
            "installed": state.installed_module,
        }
    )


def describe(plan: NodePlan) -> str:
    """One line a GPU engineer reads to know what this host will get."""
    spec, host_state, resolution = plan.spec, plan.state, plan.require_resolution()
    gpus = Counter(
        (gpu_by_device_id(d.device_id) or _unknown(d.device_id)).name for d in host_state.gpus
    )
    hardware = ", ".join(f"{count}x {name}" for name, count in gpus.items()) or "no GPU"
    switches = sum(1 for d in host_state.pci if d.is_nvswitch)
    if switches:
        hardware += f", {switches} NVSwitch"
    driver = list(resolution.driver_packages)
    if wants_fabric_manager(plan):
        driver += fabric_packages(plan)
    lock = resolution.pinning_package or "apt preferences + hold"
    no_dcgm = dcgm_skip_reason(plan)
    dcgm = f"DCGM not installed: {no_dcgm}" if no_dcgm else f"DCGM {DCGM_VERSION}"
    no_nccl_tests = nccl_tests_skip_reason(plan)
    nccl_tests = f"nccl-tests not built: {no_nccl_tests}" if no_nccl_tests else "nccl-tests"
    if plan.spec.nccl_tests_mpi:
        nccl_tests += " + MPI build"
    stack = [
        f"CUDA {resolution.cuda}" if spec.install_cuda_toolkit else "",
        f"cuDNN {resolution.cudnn}" if spec.install_cudnn else "",
        f"NCCL {resolution.nccl}" if spec.install_nccl else "",
    ]
    return (
        f"{host_state.os_pretty or host_state.os_id} {host_state.arch}, kernel "
        f"{host_state.kernel}; {hardware} -> repository {resolution.repo_distro}/"
        f"{resolution.repo_arch}; driver {resolution.driver_branch} "
        f"({resolution.kernel_module_flavor} modules: {', '.join(driver)}; locked by {lock}); "
        f"{', '.join(s for s in stack if s) or 'no system CUDA stack'}; {dcgm}; {nccl_tests}; "
        f"TensorFlow "
        f"{resolution.tf_version} ({spec.tensorflow_package}) in {spec.python_env} "
        f"{spec.env_dir}; reboot policy {spec.reboot}"
    )


def _unknown(device_id: str) -> GpuModel:
    return GpuModel(device_id, f"NVIDIA device {device_id}", "", (0, 0), "", False, False, {}, 0)


def refusals(plan: NodePlan) -> list[str]:
    """Every reason to refuse this host, each saying what was found and what to do."""
    if plan.unsupported:
        return [plan.unsupported]
    if not plan.state.systemd_booted:  # every later fact and check would fail on it instead
        return [NO_SYSTEMD]
    reasons: list[str] = []
    for check in (
        _gpus,
        _secure_boot,
        _mok_dkms,
        _foreign_driver,
        _gpu_processes,
        _disk,
        _venv_python,
    ):
        reason = check(plan)
        if reason:
            reasons.append(reason)
    return reasons


NO_SYSTEMD = (
    "not booted with systemd (no /run/systemd/system: a container, or another init as PID 1); "
    "the deploy runs systemd services (persistence daemon, DCGM, the periodic timer) and "
    "reboots the host. Fix: provision a VM or bare-metal host booted with systemd, or leave "
    "this one out (--limit)."
)


def _gpus(plan: NodePlan) -> str | None:
    gpus = plan.state.gpus
    if plan.spec.gpu_less:
        return None
    if not gpus:
        return (
            "no NVIDIA GPU on the PCI bus (no vendor 0x10de display device under "
            "/sys/bus/pci/devices). Fix: check the card is seated or passed through to the VM, "
            "or set gpu_less: True for a host without GPUs."
        )
    if plan.spec.gpu_count is not None and len(gpus) < plan.spec.gpu_count:
        return (
            f"{len(gpus)} NVIDIA GPU(s) on the PCI bus, gpu_count expects {plan.spec.gpu_count}. "
            "Fix: reseat or replace the missing GPU(s), or correct gpu_count."
        )
    return None


# dkms reads /etc/dkms/framework.conf.d/ and its mok_signing_key / mok_certificate settings
# from 3.0.4 on (dkms-project/dkms, "Rework signing" #162); Ubuntu 20.04 ships dkms 2.8.1 and
# 22.04 dkms 2.8.7, which ignore them; 24.04 ships 3.0.11 and Debian 12 3.0.10.
OLD_DKMS = {("ubuntu", "20.04"): "2.8.1", ("ubuntu", "22.04"): "2.8.7"}


def _mok_dkms(plan: NodePlan) -> str | None:
    """secure_boot_plan 'mok' where the release's dkms would ignore the signing settings."""
    old = OLD_DKMS.get((plan.state.os_id, plan.state.os_version))
    if plan.spec.secure_boot_plan != "mok" or old is None:
        return None
    return (
        f"secure_boot_plan 'mok' configures dkms through /etc/dkms/framework.conf.d/ "
        f"(mok_signing_key, mok_certificate), which dkms reads from 3.0.4 on; "
        f"{plan.state.os_pretty or plan.state.os_id} ships dkms {old}, which ignores it, so "
        "the NVIDIA modules would not be signed with your MOK and the kernel would reject them "
        "after the reboot ('Key was rejected by service'). Fix: use secure_boot_plan "
        "'ubuntu-signed' (Ubuntu's dkms signs with the enrolled shim-signed MOK), or Ubuntu "
        "24.04 / Debian 12 for your own MOK."
    )


def _secure_boot(plan: NodePlan) -> str | None:
    if not plan.state.secure_boot:
        return None
    sb_plan = plan.spec.secure_boot_plan
    if sb_plan == "none":
        return (
            "Secure Boot is enabled and secure_boot_plan is 'none': the unsigned NVIDIA kernel "
            "modules would be rejected ('Key was rejected by service'). Fix: disable Secure "
            "Boot in the firmware, or set secure_boot_plan: 'ubuntu-signed' (Ubuntu) or 'mok' "
            "with mok_key_path and mok_cert_path."
        )
    if sb_plan == "ubuntu-signed":
        if plan.state.os_id != "ubuntu":
            return (
                f"secure_boot_plan 'ubuntu-signed' needs Ubuntu; this host runs "
                f"{plan.state.os_pretty or plan.state.os_id}. Fix: use secure_boot_plan: 'mok'."
            )
        if not plan.state.shim_mok_present:
            return (
                "secure_boot_plan 'ubuntu-signed' relies on the MOK of shim-signed, but "
                "/var/lib/shim-signed/mok/MOK.der is missing. Fix: run `update-secureboot-policy "
                "--new-key` and enroll it at the next boot, or use secure_boot_plan: 'mok'."
            )
    return None


def _foreign_driver(plan: NodePlan) -> str | None:
    if plan.spec.replace_foreign_driver:
        return None
    found = foreign_driver(plan)
    if not found:
        return None
    return (
        f"a foreign NVIDIA driver is installed: {found}. Fix: remove it, or set "
        "replace_foreign_driver: True to let gpufleet remove it and install branch "
        f"{plan.require_resolution().driver_branch}."
    )


def foreign_driver(plan: NodePlan) -> str | None:
    """Describe a driver gpufleet did not install (runfile, distro build, other branch)."""
    host_state = plan.state
    resolution = plan.require_resolution()
    if host_state.runfile_uninstaller:
        return f"a runfile install ({host_state.runfile_uninstaller} exists)"
    distro_built = host_state.distro_driver_packages
    if distro_built:
        listed = ", ".join(f"{name} {version}" for name, version in sorted(distro_built.items()))
        return f"driver packages built by the distribution ({listed})"
    branches = host_state.installed_branches
    if branches and host_state.marker_branch is None and branches != {resolution.driver_branch}:
        listed = ", ".join(f"{n} {v}" for n, v in sorted(host_state.packages.items()))
        return (
            f"branch {', '.join(map(str, sorted(branches)))} not installed by gpufleet ({listed})"
        )
    if host_state.loaded_driver and not branches:
        return f"NVIDIA module {host_state.loaded_driver} is loaded but no package provides it"
    return None


def driver_will_change(plan: NodePlan) -> bool:
    """Whether this run replaces a driver the host already has."""
    return plan.installed_branch_differs or (
        plan.spec.replace_foreign_driver and foreign_driver(plan) is not None
    )


def _gpu_processes(plan: NodePlan) -> str | None:
    processes = plan.state.gpu_processes
    if not processes or plan.spec.force_driver_change or not driver_will_change(plan):
        return None
    installed = ", ".join(map(str, sorted(plan.state.installed_branches))) or "a foreign driver"
    return (
        f"the driver is about to change ({installed} -> {plan.require_resolution().driver_branch}) "
        f"while {len(processes)} GPU process(es) run ({'; '.join(processes)}). Fix: drain the "
        "host and run again, or set force_driver_change: True."
    )


def _disk(plan: NodePlan) -> str | None:
    resolution = plan.require_resolution()
    provisioned = plan.state.env_present and (
        resolution.driver_branch in plan.state.installed_branches
    )
    needed = plan.spec.min_free_disk_gib * 1024 * 1024
    if provisioned:
        return None
    # One finding per filesystem, naming every path of the deploy it holds.
    short: dict[str, tuple[int, list[str]]] = {}
    for path in disk_paths(plan.spec):
        found = plan.state.free_disk.get(path)
        if found is None and path == "/" and plan.state.free_disk_kib is not None:
            found = (plan.state.free_disk_kib, "/")
        if found is None or found[0] >= needed:
            continue
        free, mount = found
        short.setdefault(mount, (free, []))[1].append(path)
    if not short:
        return None
    listed = "; ".join(
        f"{free / 1024 / 1024:.1f} GiB free on {mount} (holding {', '.join(paths)})"
        for mount, (free, paths) in short.items()
    )
    return (
        f"{listed}: {plan.spec.min_free_disk_gib} GiB needed on each filesystem the deploy "
        "writes to (the driver, CUDA, the apt cache, the Python environment, the payload). "
        "Fix: free space there, or lower min_free_disk_gib if you know less is needed."
    )


def _venv_python(plan: NodePlan) -> str | None:
    """A plain venv is built on the OS archive's interpreter: refuse one TensorFlow cannot use
    (Ubuntu 20.04's python3 is 3.8), or one the archive does not have, naming the fix."""
    interpreter = plan.spec.venv_interpreter
    if interpreter is None:
        return None
    release = matrix.TF_RELEASES[plan.require_resolution().tf_version]
    return venv_python_conflict(release, plan.state.os_id, plan.state.os_version, interpreter)
