"""Whole-deploy plans of the vendor stages (DCGM, nccl-tests) and of a focal venv, from the
shared @fake fleet plan (tests/unit/deploy_plan_fleet.py)."""

from __future__ import annotations

import pytest

from tests.unit.deploy_plan_fleet import summary

DCGM_INSTALL = "gpufleet dcgm | DCGM (datacenter-gpu-manager-4), pinned"


def test_dcgm_installed_pinned_held_and_running_on_data_centre_gpus(fleet_plan):
    _, changes = fleet_plan
    # DCGM follows the driver's CUDA major: R580 is CUDA 13, but Volta on R580 keeps -cuda12.
    for name, major in (("u2204-hgx-h100", "13"), ("u2404-arm-h100", "13"), ("u2204-v100", "12")):
        dcgm = [op for op in changes[name] if op.startswith("gpufleet dcgm")]
        assert dcgm == [
            DCGM_INSTALL,
            "gpufleet dcgm | datacenter-gpu-manager-4-core held",
            f"gpufleet dcgm | datacenter-gpu-manager-4-cuda{major} held",
            "gpufleet dcgm | datacenter-gpu-manager-4-proprietary held",
            f"gpufleet dcgm | datacenter-gpu-manager-4-proprietary-cuda{major} held",
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


def test_nccl_tests_mpi_adds_openmpi_and_a_second_build_beside_the_first(fleet_plan):
    result, changes = fleet_plan
    ops = [op for op in changes["deb12-h100-mpi"] if op.startswith("gpufleet nccl_tests")]
    assert ops == [
        "gpufleet nccl_tests | build tools for nccl-tests",
        "gpufleet nccl_tests | nccl-tests built in /opt/gpufleet/nccl-tests/38974e703421 "
        "(sha256 checked)",
        "gpufleet nccl_tests | OpenMPI for nccl-tests across hosts",
        "gpufleet nccl_tests | nccl-tests with MPI built in "
        "/opt/gpufleet/nccl-tests/38974e703421-mpi (sha256 checked)",
    ]
    assert "; nccl-tests + MPI build;" in summary(result, "deb12-h100-mpi")
    assert not any("with MPI" in op for op in changes["u2204-hgx-h100"])  # only when asked


def test_nccl_tests_mpi_is_built_on_a_one_gpu_host_without_the_single_host_build(fleet_plan):
    result, changes = fleet_plan
    ops = [op for op in changes["u2404-arm-h100-mpi"] if op.startswith("gpufleet nccl_tests")]
    assert ops == [
        "gpufleet nccl_tests | build tools for nccl-tests",
        "gpufleet nccl_tests | OpenMPI for nccl-tests across hosts",
        "gpufleet nccl_tests | nccl-tests with MPI built in "
        "/opt/gpufleet/nccl-tests/38974e703421-mpi (sha256 checked)",
    ]
    # no OpenMPI pin for Ubuntu 24.04 yet: the plan warns that the archive's version goes in
    assert "no pinned OpenMPI version for ubuntu 24.04" in result.stderr


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
