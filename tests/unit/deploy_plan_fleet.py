"""One @fake inventory holding every deploy-plan scenario as a host, planned by the real pyinfra CLI
(in a subprocess: pyinfra_cli monkey-patches the process with gevent)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests import pyinfra_cli
from tests.unit.fake_fleet import (
    H100,
    NO_MARKER,
    NVSWITCH_H100,
    V100,
    FakeGpuHost,
    root,
    write_inventory,
)

ROOT = root()

SCENARIOS = {
    "u2004-a100": FakeGpuHost(os_version="20.04", kernel="5.4.0-200-generic"),
    "u2204-hgx-h100": FakeGpuHost(gpus=(H100,) * 8, nvswitches=(NVSWITCH_H100,) * 4),
    # PyPI's aarch64 TensorFlow has no CUDA: an arm64 GPU host is provisioned only without
    # require_cuda_build (else the matrix refuses it, naming NGC's containers).
    "u2404-arm-h100": FakeGpuHost(
        os_version="24.04",
        arch="aarch64",
        kernel="6.8.0-45-generic-64k",
        gpus=(H100,),
        inventory={"require_cuda_build": False},
    ),
    "deb12-a100": FakeGpuHost(os_id="debian", os_version="12", kernel="6.1.0-18-amd64"),
    "deb12-h100-mpi": FakeGpuHost(
        os_id="debian",
        os_version="12",
        kernel="6.1.0-18-amd64",
        gpus=(H100,) * 8,
        nvswitches=(NVSWITCH_H100,) * 4,
        inventory={"nccl_tests_mpi": True},
    ),
    "u2404-arm-h100-mpi": FakeGpuHost(
        os_version="24.04",
        arch="aarch64",
        kernel="6.8.0-45-generic-64k",
        gpus=(H100,),
        inventory={"nccl_tests_mpi": True, "require_cuda_build": False},
    ),
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
        packages={"nvidia-fabricmanager": "580.126.09-1"},
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
    # dkms reads framework.conf.d from 3.0.4: Ubuntu 24.04 (3.0.11), not 22.04 (2.8.7).
    "secure-boot-mok": FakeGpuHost(
        secure_boot=True,
        os_version="24.04",
        kernel="6.8.0-45-generic",
        inventory={
            "secure_boot_plan": "mok",
            "mok_key_path": "/var/lib/gpufleet/mok/MOK.priv",
            "mok_cert_path": "/var/lib/gpufleet/mok/MOK.der",
        },
    ),
    "secure-boot-mok-jammy": FakeGpuHost(
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
    # Changed from 575 to 580 by a deploy whose probe did not list NSCQ: NVIDIA's 575 NSCQ
    # (suffixed; 580's is libnvidia-nscq) stayed behind, still on hold.
    "stale-nscq-575": FakeGpuHost(
        provisioned=True,
        gpus=(H100,) * 8,
        nvswitches=(NVSWITCH_H100,) * 4,
        packages={"libnvidia-nscq-575": "575.57.08-1"},
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
    # Provisioned, but XLA's warm-up never completed (a GPU was busy, a reboot was pending).
    "done-a100-cold-xla": FakeGpuHost(provisioned=True, xla_marker=NO_MARKER),
    # Warmed for an older TensorFlow: the marker no longer matches.
    "done-a100-old-xla": FakeGpuHost(
        provisioned=True,
        xla_marker="gpufleet XLA warm-up: tensorflow[and-cuda]==2.20.0; payload sha256 0; "
        "GPUs 8x 20b2",
    ),
}

REFUSED = {
    "distro-driver": "foreign NVIDIA driver is installed: driver packages built by the "
    "distribution (nvidia-driver-535-server 535.183.01-0ubuntu0.22.04.1)",
    "runfile-driver": "a runfile install (/usr/bin/nvidia-uninstall exists)",
    "secure-boot": "Secure Boot is enabled and secure_boot_plan is 'none'",
    "secure-boot-mok-jammy": "Ubuntu 22.04.4 LTS ships dkms 2.8.7, which ignores it",
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
    return pyinfra_cli.run(inventory, pyinfra_cli.GPU_NODE, *args)


def plan_fleet(folder: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    """Plan every scenario in one pyinfra run; the run and each host's changing operations."""
    inventory = write_inventory(folder / "inventory.py", SCENARIOS)
    result, plan = pyinfra_cli.plan(inventory)
    changes: dict[str, list[str]] = {name: [] for name in SCENARIOS}
    for op in plan:
        for host in op["hosts_with_change"] + op["hosts_with_conditional_change"]:
            changes[host.removeprefix("@fake/")].append(op["name"])
    return result, changes


def summary(result: subprocess.CompletedProcess[str], name: str) -> str:
    """The "gpufleet plan:" line preflight logs for a host that passed."""
    for line in result.stderr.splitlines():
        if f"@fake/{name}]" in line and "gpufleet plan:" in line:
            return line
    raise AssertionError(f"no plan summary for {name}:\n{result.stderr[-3000:]}")
