"""Whole-deploy plans of deploy/gpu_node.py through pyinfra's @fake connector (the real CLI).

One inventory holds every scenario as a host; pyinfra plans them all in one run. The CLI runs
in a subprocess because pyinfra_cli monkey-patches the process with gevent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.fake_fleet import (
    H100,
    NVSWITCH_H100,
    V100,
    FakeGpuHost,
    root,
    write_inventory,
)

ROOT = root()
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))

SCENARIOS = {
    "u2004-a100": FakeGpuHost(os_version="20.04", kernel="5.4.0-200-generic"),
    "u2204-hgx-h100": FakeGpuHost(gpus=(H100,) * 8, nvswitches=(NVSWITCH_H100,) * 4),
    "u2404-arm-h100": FakeGpuHost(
        os_version="24.04", arch="aarch64", kernel="6.8.0-45-generic-64k", gpus=(H100,)
    ),
    "deb12-a100": FakeGpuHost(os_id="debian", os_version="12", kernel="6.1.0-18-amd64"),
    "u2204-v100": FakeGpuHost(gpus=(V100,) * 4),
    "hwe-kernel": FakeGpuHost(kernel="6.5.0-35-generic"),
    "done-a100": FakeGpuHost(provisioned=True),
    "done-hgx-h100": FakeGpuHost(
        provisioned=True, gpus=(H100,) * 8, nvswitches=(NVSWITCH_H100,) * 4
    ),
    "fm-version-drift": FakeGpuHost(
        provisioned=True,
        gpus=(H100,) * 8,
        nvswitches=(NVSWITCH_H100,) * 4,
        packages={"nvidia-fabricmanager-580": "580.126.09-1"},
    ),
    "done-v100-venv": FakeGpuHost(
        provisioned=True, gpus=(V100,) * 2, inventory={"python_env": "venv"}
    ),
    "distro-driver": FakeGpuHost(
        packages={"nvidia-driver-535-server": "535.183.01-0ubuntu0.22.04.1"},
        loaded_driver="535.183.01",
    ),
    "runfile-driver": FakeGpuHost(runfile=True, loaded_driver="550.54.14"),
    "replace-distro": FakeGpuHost(
        packages={"nvidia-driver-535-server": "535.183.01-0ubuntu0.22.04.1"},
        inventory={"replace_foreign_driver": True},
    ),
    "secure-boot": FakeGpuHost(secure_boot=True),
    "secure-boot-mok": FakeGpuHost(
        secure_boot=True,
        inventory={
            "secure_boot_plan": "mok",
            "mok_key_path": "/var/lib/gpufleet/mok/MOK.priv",
            "mok_cert_path": "/var/lib/gpufleet/mok/MOK.der",
        },
    ),
    "replace-runfile": FakeGpuHost(
        runfile=True, loaded_driver="550.54.14", inventory={"replace_foreign_driver": True}
    ),
    "busy-570": FakeGpuHost(
        packages={"cuda-drivers-570": "570.195.03-1", "libnvidia-compute-570": "570.195.03-0"},
        marker_branch=570,
        loaded_driver="570.195.03",
        gpu_processes=("4242, python3", "4243, python3"),
    ),
    "change-570": FakeGpuHost(
        packages={"cuda-drivers-570": "570.195.03-1", "nvidia-fabricmanager-570": "570.195.03-1"},
        marker_branch=570,
        loaded_driver="570.195.03",
    ),
    # Provisioned on 570 after a change from 580 that left NVIDIA's 580 pinning package behind
    # (versioned by the branch alone); it would hold nvidia-* at 580.* with priority 1000.
    "stale-pinning-580": FakeGpuHost(
        provisioned=True,
        packages={"nvidia-driver-pinning-580": "580-1ubuntu1"},
        inventory={"driver_branch": 570},
    ),
    "no-gpu": FakeGpuHost(gpus=()),
    "centos": FakeGpuHost(os_id="centos", os_version="7"),
    "small-disk": FakeGpuHost(free_gib=10),
    "u2004-venv": FakeGpuHost(os_version="20.04", inventory={"python_env": "venv"}),
    "u2204-venv": FakeGpuHost(inventory={"python_env": "venv"}),
    "u2004-venv-py39": FakeGpuHost(
        os_version="20.04",
        kernel="5.4.0-200-generic",
        inventory={"python_env": "venv", "python_interpreter": "python3.9", "tf_version": "2.20.0"},
    ),
    "cpu-only": FakeGpuHost(
        gpus=(), inventory={"gpu_less": True, "persistenced": False, "reboot": "never"}
    ),
    "cpu-sandbox-like": FakeGpuHost(gpus=(), inventory={"gpu_less": True}),
    "no-periodic": FakeGpuHost(inventory={"periodic_checks": False}),
    "done-no-periodic": FakeGpuHost(provisioned=True, inventory={"periodic_checks": False}),
    "dcgm-off": FakeGpuHost(inventory={"dcgm": "off"}),
    "done-cpu-dcgm-on": FakeGpuHost(
        provisioned=True, gpus=(), inventory={"gpu_less": True, "dcgm": "on"}
    ),
}

REFUSED = {
    "distro-driver": "foreign NVIDIA driver is installed: driver packages built by the "
    "distribution (nvidia-driver-535-server 535.183.01-0ubuntu0.22.04.1)",
    "runfile-driver": "a runfile install (/usr/bin/nvidia-uninstall exists)",
    "secure-boot": "Secure Boot is enabled and secure_boot_plan is 'none'",
    "busy-570": "the driver is about to change (570 -> 580) while 2 GPU process(es) run",
    "no-gpu": "no NVIDIA GPU on the PCI bus",
    "centos": "OS centos 7 is not supported",
    "small-disk": "10.0 GiB free on / (holding /, /var/cache/apt, /opt/gpufleet, "
    "/opt/gpufleet/validation): 25 GiB needed",
    "u2004-venv": "TensorFlow 2.21.0 needs Python >= 3.10; a venv on Ubuntu 20.04 would use "
    "python3 (3.8). Fix: on Ubuntu 20.04 use python_env: conda (python_version: '3.13'), or "
    "tf_version <= 2.20.0 with python_interpreter: python3.9",
}


def run_pyinfra(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYINFRA_PROGRESS": "off"}
    return subprocess.run(
        [PYINFRA, str(inventory), str(ROOT / "deploy" / "gpu_node.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def fleet_plan(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    inventory = write_inventory(tmp_path_factory.mktemp("fleet") / "inventory.py", SCENARIOS)
    result = run_pyinfra(inventory, "--dry", "--json")
    plan = json.loads(result.stdout)["plan"]
    changes: dict[str, list[str]] = {name: [] for name in SCENARIOS}
    for op in plan:
        for host in op["hosts_with_change"] + op["hosts_with_conditional_change"]:
            changes[host.removeprefix("@fake/")].append(op["name"])
    return result, changes


def test_run_fails_only_because_of_refused_hosts(fleet_plan):
    result, changes = fleet_plan
    assert result.returncode == 1, result.stderr
    for name in REFUSED:
        assert changes[name] == [], f"refused host {name} would still be changed"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusal_names_what_was_found_and_the_fix(fleet_plan, name):
    result, _ = fleet_plan
    lines = [
        line
        for line in result.stderr.splitlines()
        if f"@fake/{name}]" in line and "refused" in line
    ]
    assert any(REFUSED[name] in line for line in lines), "\n".join(lines) or result.stderr[-3000:]
    assert all("Fix:" in line for line in lines)


@pytest.mark.parametrize(
    "name", ["done-a100", "done-hgx-h100", "done-v100-venv", "done-no-periodic"]
)
def test_provisioned_host_plans_no_change(fleet_plan, name):
    _, changes = fleet_plan
    assert changes[name] == []


def summary(result: subprocess.CompletedProcess[str], name: str) -> str:
    """The "gpufleet plan:" line preflight logs for a host that passed."""
    for line in result.stderr.splitlines():
        if f"@fake/{name}]" in line and "gpufleet plan:" in line:
            return line
    raise AssertionError(f"no plan summary for {name}:\n{result.stderr[-3000:]}")


def test_fresh_host_plans_every_stage_in_order(fleet_plan):
    result, changes = fleet_plan
    ops = changes["u2004-a100"]
    stages = [op.split(" | ")[0] for op in ops]
    assert list(dict.fromkeys(stages)) == [
        "gpufleet nvidia_repo",
        "gpufleet driver",
        "gpufleet cuda_stack",
        "gpufleet nccl_tests",
        "gpufleet python_env",
        "gpufleet validation_payload",
        "gpufleet cluster_tools",
        "gpufleet monitoring",
    ]
    for expected in (
        "gpufleet nvidia_repo | NVIDIA CUDA repository (key fingerprint checked)",
        "gpufleet driver | kernel headers and DKMS",
        "gpufleet driver | /etc/modprobe.d/gpufleet-blacklist-nouveau.conf: nouveau blacklisted "
        "(initramfs rebuilt on change)",
        "gpufleet driver | /etc/apt/preferences.d/00-gpufleet-no-distro-nvidia-driver: distro "
        "builds of the NVIDIA driver blocked (NVIDIA's repository only)",
        # NVIDIA's ubuntu2004 repository ends with R575, which has no pinning package.
        "gpufleet driver | /etc/apt/preferences.d/gpufleet-nvidia-driver: driver branch locked "
        "by apt preferences",
        "gpufleet driver | NVIDIA driver packages of the locked branch",
        "gpufleet driver | nvidia-open-575 held",
        "gpufleet driver | /etc/apt/apt.conf.d/51gpufleet-unattended-upgrades: "
        "unattended-upgrades leaves NVIDIA, CUDA, cuDNN, NCCL alone",
        "gpufleet driver | nvidia-persistenced enabled",
        "gpufleet driver | nvidia-persistenced running",
        "gpufleet cuda_stack | system CUDA toolkit",
        "gpufleet cuda_stack | cuDNN runtime and dev, pinned",
        "gpufleet cuda_stack | NCCL runtime and dev, pinned",
        "gpufleet cuda_stack | libnccl2 held",
        "gpufleet cuda_stack | libcudnn9-cuda-12 held",
        "gpufleet python_env | Miniforge (installer sha256 checked, then run, in one command)",
        "gpufleet python_env | pip install TensorFlow from the hashed lock (--require-hashes), "
        "check it imports",
        "gpufleet python_env | /opt/gpufleet/miniforge3/envs/tf/etc/gpufleet/requirements.lock"
        ".txt: hashed pip lock for tensorflow[and-cuda]==2.21.0",
        "gpufleet validation_payload | validation suite, versioned, with a current link",
        "gpufleet cluster_tools | iperf3 and ping for the cluster tier",
        "gpufleet monitoring | /etc/gpufleet/expectations.json: expectations for the periodic "
        "checks",
        "gpufleet monitoring | /etc/systemd/system/gpufleet-periodic.service, "
        "gpufleet-periodic.timer: periodic checks' units",
        "gpufleet monitoring | gpufleet-periodic.timer enabled",
        "gpufleet monitoring | gpufleet-periodic.timer started",
    ):
        assert expected in ops
    assert not any("fabricmanager" in op for op in ops)
    line = summary(result, "u2004-a100")
    assert "Ubuntu 20.04.6 LTS x86_64, kernel 5.4.0-200-generic; 8x NVIDIA A100-SXM4-80GB" in line
    assert (
        "repository ubuntu2004/x86_64; driver 575 (open modules: nvidia-open-575; locked by "
        "apt preferences + hold); CUDA 12.5, cuDNN 9.3.0.75, NCCL 2.27.7" in line
    )


def test_nvswitch_host_gets_fabric_manager(fleet_plan):
    result, changes = fleet_plan
    ops = changes["u2204-hgx-h100"]
    assert "gpufleet driver | nvidia-fabricmanager enabled (NVSwitch)" in ops
    assert "gpufleet driver | nvidia-fabricmanager running (NVSwitch)" in ops
    line = summary(result, "u2204-hgx-h100")
    assert "8x NVIDIA H100 80GB HBM3, 4 NVSwitch" in line
    assert "open modules: nvidia-open, nvidia-fabricmanager-580;" in line


def test_aarch64_host_uses_the_sbsa_repository(fleet_plan):
    result, changes = fleet_plan
    assert "repository ubuntu2404/sbsa;" in summary(result, "u2404-arm-h100")
    assert (
        "gpufleet python_env | Miniforge (installer sha256 checked, then run, in one command)"
        in changes["u2404-arm-h100"]
    )


def test_debian_host(fleet_plan):
    result, _ = fleet_plan
    assert "repository debian12/x86_64;" in summary(result, "deb12-a100")


def test_volta_gets_proprietary_modules(fleet_plan):
    result, _ = fleet_plan
    assert "driver 580 (proprietary modules: cuda-drivers;" in summary(result, "u2204-v100")


def test_branch_change_removes_the_old_branch_first(fleet_plan):
    _, changes = fleet_plan
    ops = changes["change-570"]
    removal = "gpufleet driver | remove the previous driver (another branch or a foreign one)"
    assert removal in ops
    assert ops.index(removal) < ops.index(
        "gpufleet driver | NVIDIA driver packages of the locked branch"
    )
    assert removal not in changes["u2204-hgx-h100"]


def test_pinning_package_of_another_branch_is_removed(fleet_plan):
    """Its version ("580-1ubuntu1") names the branch without a driver version."""
    _, changes = fleet_plan
    assert changes["stale-pinning-580"] == [
        "gpufleet driver | remove the previous driver (another branch or a foreign one)"
    ]


def test_allowed_foreign_driver_is_removed(fleet_plan):
    _, changes = fleet_plan
    assert (
        "gpufleet driver | remove the previous driver (another branch or a foreign one)"
        in (changes["replace-distro"])
    )


def test_periodic_checks_follow_their_key(fleet_plan):
    _, changes = fleet_plan
    assert not any(op.startswith("gpufleet monitoring") for op in changes["no-periodic"])
    assert (
        "gpufleet validation_payload | validation suite, versioned, with a current link"
        in (changes["no-periodic"])
    )


def test_persistenced_follows_its_key(fleet_plan):
    _, changes = fleet_plan
    ops = changes["cpu-only"]
    assert "gpufleet driver | NVIDIA driver packages of the locked branch" in ops
    assert not any("persistenced" in op for op in ops)
    assert "gpufleet driver | nvidia-persistenced enabled" in changes["cpu-sandbox-like"]
    assert "gpufleet driver | nvidia-persistenced running" in changes["cpu-sandbox-like"]


def test_prod_inventory_plan_reads_stage_by_stage():
    """`pyinfra inventories/prod.py deploy/gpu_node.py --dry` with @fake hosts of each kind."""
    result = run_pyinfra(
        ROOT / "tests" / "unit" / "fake_prod.py",
        "--dry",
        "--group-data",
        str(ROOT / "inventories" / "group_data"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    rows = [line.strip() for line in lines if line.strip().startswith("gpufleet ")]
    stages = list(dict.fromkeys(row.split(" | ")[0] for row in rows))
    assert stages == [
        "gpufleet run_start",
        "gpufleet nvidia_repo",
        "gpufleet driver",
        "gpufleet cuda_stack",
        "gpufleet dcgm",
        "gpufleet nccl_tests",
        "gpufleet python_env",
        "gpufleet validation_payload",
        "gpufleet cluster_tools",
        "gpufleet monitoring",
        "gpufleet run_end",
    ]
    fabric = next(row for row in rows if "nvidia-fabricmanager enabled" in row)
    # Change column: "4 (@fake/gpu-a100-01..., ...)": the A100 and H100 HGX hosts, not the V100.
    assert fabric.split("(NVSwitch)", 1)[1].split()[0] == "4"
    assert "4x Tesla V100-PCIE-16GB" in summary(result, "gpu-v100-01.dc2.example.net")
    assert "in venv /opt/gpufleet/venvs/tf" in summary(result, "gpu-v100-01.dc2.example.net")


def test_fabric_manager_follows_the_driver_version(fleet_plan):
    _, changes = fleet_plan
    assert changes["fm-version-drift"] == [
        "gpufleet driver | Fabric Manager at the driver's exact version"
    ]


def test_secure_boot_with_a_mok_plan_signs_modules(fleet_plan):
    _, changes = fleet_plan
    mok = "gpufleet driver | /etc/dkms/framework.conf.d/gpufleet-mok.conf: DKMS signs modules"
    assert f"{mok} with the MOK" in changes["secure-boot-mok"]
    assert not any(op.startswith(mok) for op in changes["u2004-a100"])


def test_allowed_runfile_driver_is_uninstalled_first(fleet_plan):
    _, changes = fleet_plan
    ops = changes["replace-runfile"]
    uninstall = "gpufleet driver | uninstall the runfile driver"
    assert ops.index(uninstall) < ops.index(
        "gpufleet driver | NVIDIA driver packages of the locked branch"
    )


DCGM_INSTALL = "gpufleet dcgm | DCGM (datacenter-gpu-manager-4), pinned"


def test_dcgm_installed_pinned_held_and_running_on_data_centre_gpus(fleet_plan):
    _, changes = fleet_plan
    for name in ("u2204-hgx-h100", "u2404-arm-h100", "u2204-v100"):
        dcgm = [op for op in changes[name] if op.startswith("gpufleet dcgm")]
        assert dcgm == [
            DCGM_INSTALL,
            "gpufleet dcgm | datacenter-gpu-manager-4-core held",
            "gpufleet dcgm | datacenter-gpu-manager-4-cuda12 held",
            "gpufleet dcgm | nvidia-dcgm enabled",
            "gpufleet dcgm | nvidia-dcgm running",
        ], name
    assert "DCGM 1:4.5.1-1" in summary(fleet_plan[0], "u2204-hgx-h100")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("u2004-a100", "DCGM 4 is not published for ubuntu2004"),
        ("deb12-a100", "DCGM 4 is not published for debian12"),
        ("dcgm-off", "dcgm: off"),
        ("cpu-sandbox-like", "no data-centre GPU on the PCI bus (dcgm: auto)"),
    ],
)
def test_dcgm_skipped_with_the_reason_in_the_plan(fleet_plan, name, why):
    result, changes = fleet_plan
    assert not any(op.startswith("gpufleet dcgm") for op in changes[name])
    assert f"DCGM not installed: {why}" in summary(result, name)


def test_dcgm_on_without_gpus_installs_it_and_a_provisioned_host_plans_nothing(fleet_plan):
    _, changes = fleet_plan
    assert changes["done-cpu-dcgm-on"] == []


def test_nccl_tests_built_on_multi_gpu_hosts_for_their_gpus_only(fleet_plan):
    result, changes = fleet_plan
    ops = [op for op in changes["u2204-hgx-h100"] if op.startswith("gpufleet nccl_tests")]
    assert ops == [
        "gpufleet nccl_tests | build tools for nccl-tests",
        "gpufleet nccl_tests | nccl-tests built in /opt/gpufleet/nccl-tests/38974e703421 "
        "(sha256 checked)",
    ]
    assert "; nccl-tests;" in summary(result, "u2204-hgx-h100")
    assert changes["done-hgx-h100"] == []


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("u2404-arm-h100", "1 GPU(s) on the PCI bus (nccl_tests: auto builds it for 2+)"),
        ("cpu-sandbox-like", "0 GPU(s) on the PCI bus"),
    ],
)
def test_nccl_tests_skipped_with_the_reason_in_the_plan(fleet_plan, name, why):
    result, changes = fleet_plan
    assert not any(op.startswith("gpufleet nccl_tests") for op in changes[name])
    assert f"nccl-tests not built: {why}" in summary(result, name)


def test_focal_venv_on_python3_9_with_tf_2_20_is_planned_on_that_interpreter(fleet_plan):
    result, changes = fleet_plan
    ops = changes["u2004-venv-py39"]
    assert "gpufleet python_env | system Python with venv (python3.9)" in ops
    assert "gpufleet python_env | virtual environment" in ops
    # focal's venv brings pip 20.0.2, which finds no manylinux_2_28 wheel: upgraded first
    pip = "gpufleet python_env | pip >= 20.3 in the venv (the OS's is older), from its hashed lock"
    assert pip in ops
    assert "gpufleet python_env | virtual environment" in changes["u2204-venv"]
    assert pip not in changes["u2204-venv"]  # jammy's pip 22.0.2 will do
    line = summary(result, "u2004-venv-py39")
    assert "driver 575" in line and "TensorFlow 2.20.0 (tensorflow[and-cuda]) in venv" in line
