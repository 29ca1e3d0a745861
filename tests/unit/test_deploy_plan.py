"""Whole-deploy plans of deploy/gpu_node.py through pyinfra's @fake connector (the real CLI).

One inventory holds every scenario as a host; pyinfra plans them all in one run. The CLI runs
in a subprocess because pyinfra_cli monkey-patches the process with gevent.
"""

from __future__ import annotations

import pytest

from tests.unit.deploy_plan_fleet import REFUSED, ROOT, run_pyinfra, summary


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
        "gpufleet xla_warm_up",
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
        "gpufleet cluster_tools | iperf3, ping and nft for the cluster tier",
        "gpufleet monitoring | /etc/gpufleet/expectations.json: expectations for the periodic "
        "checks",
        "gpufleet monitoring | /etc/systemd/system/gpufleet-periodic.service, "
        "gpufleet-periodic.timer: periodic checks' units",
        "gpufleet monitoring | gpufleet-periodic.timer enabled",
        "gpufleet monitoring | gpufleet-periodic.timer started",
        "gpufleet xla_warm_up | XLA's compile cache warmed: every compiled step of the quick "
        "and full tiers",
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
    assert "open modules: nvidia-open, nvidia-fabricmanager, libnvidia-nscq;" in line
    assert "gpufleet driver | nvidia-fabricmanager held" in ops
    assert not any("nvidia-fabricmanager-580" in op for op in ops)  # a virtual name only


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


def test_fabric_packages_of_the_old_branch_are_removed(fleet_plan):
    """NSCQ follows the driver like Fabric Manager: the probe lists it, so a 575 NSCQ left on
    a 580 host is removed (with the old patterns the probe never saw it)."""
    _, changes = fleet_plan
    assert changes["stale-nscq-575"] == [
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
        "gpufleet xla_warm_up",
    ]
    fabric = next(row for row in rows if "nvidia-fabricmanager enabled" in row)
    # Change column: "4 (@fake/gpu-a100-01..., ...)": the A100 and H100 HGX hosts, not the V100.
    assert fabric.split("(NVSwitch)", 1)[1].split()[0] == "4"
    assert "4x Tesla V100-PCIE-16GB" in summary(result, "gpu-v100-01.dc2.example.net")
    assert "in venv /opt/gpufleet/venvs/tf" in summary(result, "gpu-v100-01.dc2.example.net")


def test_fabric_manager_follows_the_driver_version(fleet_plan):
    _, changes = fleet_plan
    assert changes["fm-version-drift"] == [
        "gpufleet driver | nvidia-fabricmanager at the driver's exact version"
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
