"""Declared state: OS, driver, nouveau, held packages, unattended-upgrades, services, DKMS, TF."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from gpufleet import matrix
from gpufleet.matrix.drivers import branch_of, version_tuple
from validation.host.hostinfo import (
    GPU_LESS_DRIVER_REASON,
    GPU_SKIP_PREFIX,
    HostInfo,
    blacklist_covers,
    parse_apt_blacklist,
    parse_showhold,
    split_apt_spec,
)

# Package name prefixes unattended-upgrades must leave alone (DESIGN.md, decision 2): an
# automatic upgrade of any of them gives "Driver/library version mismatch" until a reboot.
UNATTENDED_BLACKLIST = ("nvidia-", "libnvidia-", "cuda-", "libcudnn", "libnccl")

TF_PROBE = """
import json, tensorflow as tf
b = tf.sysconfig.get_build_info()
print(json.dumps({"version": tf.__version__, "is_cuda_build": bool(b.get("is_cuda_build")),
    "cuda_version": b.get("cuda_version"), "cudnn_version": b.get("cudnn_version"),
    "gpus": len(tf.config.list_physical_devices("GPU"))}))
"""


def test_os_supported(info: HostInfo, record: Any) -> None:
    """The OS release and architecture are ones NVIDIA's CUDA repository serves."""
    os_id, version = info.os_release.get("ID", "?"), info.os_release.get("VERSION_ID", "?")
    record(os=f"{os_id} {version}", arch=info.machine, kernel=info.kernel)
    try:
        distro = matrix.nvidia_repo_distro(os_id, version)
        arch = matrix.nvidia_repo_arch(info.machine)
    except matrix.MatrixError as exc:
        pytest.fail(str(exc))
    record(f"{os_id} {version} on {info.machine}: NVIDIA repository {distro}/{arch}")


def test_nouveau_not_loaded(host: Any) -> None:
    """The nouveau module is not loaded (it holds the GPUs NVIDIA's driver needs)."""
    loaded = host.run("test -d /sys/module/nouveau").rc == 0
    assert not loaded, (
        "the nouveau module is loaded; blacklist it (the driver stage does) and reboot"
    )


def test_driver_loaded(host: Any, info: HostInfo, resolution: dict, record: Any) -> None:
    """The loaded NVIDIA module is of the pinned branch, flavour and minimum, and is installed."""
    if not info.nvidia_module_loaded:
        if not info.gpus_on_bus:
            pytest.skip(GPU_LESS_DRIVER_REASON)
        pytest.fail(
            f"no NVIDIA kernel module loaded although {len(info.gpus_on_bus)} NVIDIA GPU(s) are "
            "on the PCI bus; see `dmesg | grep -i nvidia`"
        )
    from gpufleet.parsers import parse_driver_version

    loaded = parse_driver_version(info.driver_version_text or "")
    assert loaded is not None, (
        f"/proc/driver/nvidia/version has no driver version: {info.driver_version_text!r}"
    )
    version, flavor = _field(loaded, "version"), _field(loaded, "flavor")
    installed = host.run("modinfo -F version nvidia").stdout.strip() or None
    record(
        loaded=version,
        flavor=flavor,
        installed=installed,
        expected_branch=resolution["driver_branch"],
    )
    assert branch_of(version) == resolution["driver_branch"], (
        f"driver {version} is loaded, but the inventory pins branch {resolution['driver_branch']}"
    )
    assert version_tuple(version) >= version_tuple(resolution["min_driver"]), (
        f"driver {version} is older than {resolution['min_driver']}, the minimum for CUDA "
        f"{resolution['cuda']}"
    )
    if flavor is not None:
        assert flavor == resolution["kernel_module_flavor"], (
            f"{flavor} kernel modules are loaded, expected {resolution['kernel_module_flavor']}"
        )
    if installed is not None:
        assert installed == version, (
            f"driver {version} is loaded but {installed} is installed: reboot to load it "
            "(until then CUDA programs fail with 'Driver/library version mismatch')"
        )
    record(f"{version} ({flavor or 'flavour unknown'})")


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _installed_versions(host: Any, names: list[str]) -> dict[str, str | None]:
    out = host.run(
        "dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\\n' "
        + " ".join(shlex.quote(n) for n in names)
        + " 2>/dev/null; true"
    ).stdout
    versions: dict[str, str | None] = dict.fromkeys(names)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "installed":
            versions[parts[0].split(":", 1)[0]] = parts[1]
    return versions


def _apt_pinned(host: Any, name: str) -> bool:
    """Whether an apt preferences file pins ``name`` (the alternative to a hold)."""
    files = "/etc/apt/preferences /etc/apt/preferences.d/*"
    pattern = shlex.quote(f"^Package:.*(^|[ ]){name}([ ]|$)")
    return host.run(f"grep -Eqs {pattern} {files}").rc == 0


def test_driver_packages_locked(host: Any, resolution: dict, record: Any) -> None:
    """The driver's packages are installed and held or pinned against upgrades."""
    names = [split_apt_spec(p)[0] for p in resolution["driver_packages"]]
    pinning = resolution.get("pinning_package")
    versions = _installed_versions(host, [*names, *([pinning] if pinning else [])])
    record(installed=versions, pinning_package=pinning)
    missing = [n for n, v in versions.items() if v is None]
    assert not missing, f"not installed: {', '.join(missing)} (run the driver stage)"
    if pinning is None:
        held = parse_showhold(host.run("apt-mark showhold").stdout)
        loose = [n for n in names if n not in held and not _apt_pinned(host, n)]
        assert not loose, f"neither held nor pinned: {', '.join(loose)} (apt-mark hold them)"
    record(f"{', '.join(names)} locked by {pinning or 'apt-mark hold'}")


def test_cuda_stack_packages_pinned(host: Any, spec: Any, resolution: dict, record: Any) -> None:
    """CUDA toolkit, cuDNN and NCCL packages are at the matrix's versions, held or pinned."""
    wanted: list[str] = []
    if spec.install_cuda_toolkit:
        wanted.append(resolution["cuda_toolkit_package"])
    if spec.install_cudnn:
        wanted += resolution["cudnn_packages"]
    if spec.install_nccl:
        wanted += resolution["nccl_packages"]
    if not wanted:
        pytest.skip("install_cuda_toolkit, install_cudnn and install_nccl are all off")
    pins = dict(split_apt_spec(p) for p in wanted)
    versions = _installed_versions(host, list(pins))
    held = parse_showhold(host.run("apt-mark showhold").stdout)
    record(installed=versions, expected={n: v for n, v in pins.items() if v})
    problems = []
    for name, want in pins.items():
        have = versions[name]
        if have is None:
            problems.append(f"{name} is not installed")
        elif want is not None and have != want:
            problems.append(f"{name} is {have}, expected {want}")
        elif want is not None and name not in held and not _apt_pinned(host, name):
            problems.append(f"{name} is neither held nor pinned")
    assert not problems, "; ".join(problems) + " (run the cuda_stack stage)"
    record(f"{len(pins)} packages at their pinned versions")


def test_unattended_upgrades_blacklist(host: Any, record: Any) -> None:
    """unattended-upgrades' blacklist covers every NVIDIA package prefix."""
    dump = host.run("apt-config dump")
    assert dump.rc == 0, f"apt-config failed: {dump.stderr.strip()}"
    entries = parse_apt_blacklist(dump.stdout)
    missing = [p for p in UNATTENDED_BLACKLIST if not blacklist_covers(entries, p)]
    record(blacklist=entries)
    assert not missing, (
        f"Unattended-Upgrade::Package-Blacklist does not cover {', '.join(missing)}: an "
        "automatic upgrade would break the driver/library match"
    )
    record(f"blacklist covers {', '.join(UNATTENDED_BLACKLIST)}")


def test_persistence_mode(host: Any, gpu: HostInfo, spec: Any, record: Any) -> None:
    """Persistence mode is on for every GPU (with persistenced, the default)."""
    if not spec.persistenced:
        pytest.skip("persistenced = False in the inventory")
    out = host.check_output("nvidia-smi --query-gpu=index,persistence_mode --format=csv,noheader")
    modes = dict(line.split(", ", 1) for line in out.splitlines() if ", " in line)
    record(persistence_mode=modes)
    off = [index for index, mode in modes.items() if mode.strip() != "Enabled"]
    assert modes and not off, f"persistence mode is off on GPU(s) {', '.join(off)}"


def test_fabric_manager(
    host: Any, info: HostInfo, spec: Any, resolution: dict, record: Any
) -> None:
    """nvidia-fabricmanager is active on NVSwitch hosts (and HGX B200)."""
    if spec.fabric_manager == "off":
        pytest.skip("fabric_manager = 'off' in the inventory")
    # HGX B200's NVLink switches are not on the host's PCI bus: its GPU id says it (nvlink5).
    needed = info.nvswitches_on_bus or resolution.get("nvlink5")
    if not needed and spec.fabric_manager != "on":
        pytest.skip("no NVSwitch on the PCI bus: Fabric Manager is not needed")
    state = host.run("systemctl is-active nvidia-fabricmanager").stdout.strip()
    record(nvswitches=len(info.nvswitches_on_bus), service=state)
    assert state == "active", f"nvidia-fabricmanager is {state or 'missing'}, expected active"


def _module_built(host: Any, kernel: str, dkms_text: str) -> bool:
    from gpufleet.parsers import parse_dkms_status

    for entry in parse_dkms_status(dkms_text):
        if (
            str(_field(entry, "module")).startswith("nvidia")
            and _field(entry, "kernel") == kernel
            and _field(entry, "status") == "installed"
        ):
            return True
    # Ubuntu's precompiled, signed modules (linux-modules-nvidia-*) need no DKMS.
    return host.run(f"modinfo -k {shlex.quote(kernel)} -F version nvidia").rc == 0


def test_dkms_module_built(host: Any, gpu: HostInfo, record: Any) -> None:
    """An NVIDIA module is built for the running and the newest installed kernel."""
    kernels = sorted({gpu.kernel, gpu.newest_kernel})
    dkms_text = host.run("dkms status 2>/dev/null; true").stdout
    missing = [k for k in kernels if not _module_built(host, k, dkms_text)]
    record(running=gpu.kernel, newest=gpu.newest_kernel)
    assert not missing, (
        f"no NVIDIA module built for kernel {', '.join(missing)}; install its headers and run "
        "`dkms autoinstall -k KERNEL` (else the next reboot loses the GPU)"
    )


@pytest.fixture(scope="module")
def tf_info(host: Any, env_python: str) -> dict[str, Any]:
    """What the environment's TensorFlow says about itself (one interpreter start)."""
    if host.run(f"test -x {shlex.quote(env_python)}").rc != 0:
        pytest.fail(f"the environment's Python {env_python} does not exist (python_env stage)")
    result = host.run(
        f"TF_CPP_MIN_LOG_LEVEL=2 {shlex.quote(env_python)} -c {shlex.quote(TF_PROBE)}"
    )
    if result.rc != 0:
        pytest.fail(f"`import tensorflow` failed with {env_python}: {result.stderr.strip()[-400:]}")
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def test_tensorflow_version(tf_info: dict, spec: Any, env_python: str, record: Any) -> None:
    """The environment's TensorFlow is the inventory's tf_version."""
    record(version=tf_info["version"], python=env_python)
    assert tf_info["version"] == spec.tf_version, (
        f"the environment has TensorFlow {tf_info['version']}, the inventory pins {spec.tf_version}"
    )
    record(f"TensorFlow {tf_info['version']} in {env_python}")


def test_tensorflow_cuda_build(
    request: pytest.FixtureRequest, info: HostInfo, spec: Any, resolution: dict, record: Any
) -> None:
    """The environment's TensorFlow is a CUDA build of the CUDA the matrix expects."""
    if not info.gpus_on_bus:
        pytest.skip(GPU_SKIP_PREFIX + "no NVIDIA GPU on the PCI bus (a CPU build serves here)")
    if not spec.require_cuda_build:
        pytest.skip("require_cuda_build = False in the inventory")
    tf_info = request.getfixturevalue("tf_info")
    record(is_cuda_build=tf_info["is_cuda_build"], cuda_version=tf_info["cuda_version"])
    assert tf_info["is_cuda_build"], "the environment's TensorFlow is not a CUDA build"
    want = resolution.get("tf_cuda") or resolution["cuda"]
    have = str(tf_info["cuda_version"] or "")
    assert have.startswith(want), f"TensorFlow was built with CUDA {have}, expected {want}"


# TensorFlow loads NCCL from the nvidia-nccl-cu12 wheel of its and-cuda extra (the wheel's
# RUNPATH and gpufleet's env put site-packages/nvidia/*/lib first), not the system libnccl2,
# which only nccl-tests uses: this is the NCCL whose version matters to TensorFlow.
NCCL_WHEEL = "nvidia-nccl-cu12"
NCCL_PROBE = f"""
import json, importlib.metadata as md
try:
    d = md.distribution("{NCCL_WHEEL}")
except md.PackageNotFoundError:
    print(json.dumps(None))
else:
    libs = [str(f.locate()) for f in d.files or [] if f.name == "libnccl.so.2"]
    print(json.dumps({{"version": d.version, "libs": libs}}))
"""


def test_tensorflow_nccl_is_the_pinned_wheel(
    info: HostInfo, spec: Any, resolution: dict, host: Any, env_python: str, record: Any
) -> None:
    """TensorFlow loads NCCL from the nvidia-nccl-cu12 wheel at the matrix's version."""
    if not info.gpus_on_bus:
        pytest.skip(GPU_SKIP_PREFIX + "no NVIDIA GPU on the PCI bus (TensorFlow loads no NCCL)")
    if not spec.require_cuda_build:
        pytest.skip("require_cuda_build = False in the inventory")
    want = (resolution.get("wheel_constraints") or {}).get(NCCL_WHEEL)
    if not want:
        pytest.skip(f"TensorFlow {resolution.get('tf_version')} pins no {NCCL_WHEEL} wheel")
    result = host.run(f"{shlex.quote(env_python)} -c {shlex.quote(NCCL_PROBE)}")
    assert result.rc == 0, f"{env_python} could not read its wheels: {result.stderr[-400:]}"
    found = json.loads(result.stdout.strip().splitlines()[-1])
    record(wheel=found, expected=want)
    assert found, f"{NCCL_WHEEL} is not installed in {env_python}'s environment (python_env stage)"
    assert found["version"] == want, (
        f"TensorFlow loads NCCL {found['version']} from the {NCCL_WHEEL} wheel; the matrix pins "
        f"{want} (the system libnccl2 serves nccl-tests only)"
    )
    assert found["libs"], f"the {NCCL_WHEEL} wheel has no libnccl.so.2"
    record(f"NCCL {want} from {found['libs'][0]}")


def test_gpu_count_on_pci_bus(info: HostInfo, spec: Any, record: Any) -> None:
    """The PCI bus holds the inventory's gpu_count NVIDIA GPUs (none when gpu_less)."""
    found = len(info.gpus_on_bus)
    record(gpus_on_bus=found, nvswitches=len(info.nvswitches_on_bus))
    if spec.gpu_less:
        assert found == 0, f"declared gpu_less, but {found} NVIDIA GPU(s) are on the PCI bus"
    elif spec.gpu_count is None:
        pytest.skip(f"gpu_count not declared in the inventory ({found} found)")
    else:
        assert found == spec.gpu_count, (
            f"{found} NVIDIA GPU(s) on the PCI bus, the inventory expects {spec.gpu_count}"
        )
    record(f"{found} GPU(s) on the PCI bus")


def test_tensorflow_sees_every_gpu(gpu: HostInfo, tf_info: dict, record: Any) -> None:
    """TensorFlow sees as many GPUs as the PCI bus holds."""
    record(tensorflow=tf_info["gpus"], pci=len(gpu.gpus_on_bus))
    assert tf_info["gpus"] == len(gpu.gpus_on_bus), (
        f"TensorFlow sees {tf_info['gpus']} GPU(s), the PCI bus has {len(gpu.gpus_on_bus)}: "
        "usually a CUDA/cuDNN library TensorFlow cannot load (`gpufleet diagnose`)"
    )
