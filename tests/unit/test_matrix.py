"""The version matrix: tables, the resolver's conflicts and messages, constraints files."""

from __future__ import annotations

import re

import pytest

from gpufleet.matrix import (
    CUDA_MIN_DRIVER,
    DRIVER_BRANCHES,
    GPUS,
    TF_RELEASES,
    MatrixError,
    gpu_by_device_id,
    nvidia_repo_arch,
    nvidia_repo_distro,
    resolve,
)
from gpufleet.matrix.apt_names import nccl_build_for
from gpufleet.matrix.drivers import version_tuple

H100 = "2330"
A100 = "20b2"
V100 = "1db1"
B200 = "2901"
T4 = "1eb8"
NVSWITCH_H100 = "22a3"


def ubuntu(tf: str = "2.21.0", **kwargs):
    return resolve(tf, os_id="ubuntu", os_version="22.04", **kwargs)


def own(warnings: list[str]) -> list[str]:
    """The resolver's warnings without the repository record's (``apt package ...``)."""
    return [w for w in warnings if not w.startswith("apt package ")]


def conflicts_of(**kwargs) -> list[str]:
    tf = kwargs.pop("tf", "2.21.0")
    kwargs.setdefault("os_id", "ubuntu")
    kwargs.setdefault("os_version", "22.04")
    with pytest.raises(MatrixError) as info:
        resolve(tf, **kwargs)
    return info.value.conflicts


# --- tables -----------------------------------------------------------------------------


def test_every_release_of_the_design_table_is_present():
    assert list(TF_RELEASES) == [
        "2.15.1", "2.16.1", "2.16.2", "2.17.0", "2.17.1", "2.18.0",
        "2.18.1", "2.19.0", "2.19.1", "2.20.0", "2.21.0",
    ]  # fmt: skip


@pytest.mark.parametrize("release", TF_RELEASES.values(), ids=lambda r: r.version)
def test_release_rows_are_consistent(release):
    assert release.cuda in CUDA_MIN_DRIVER
    assert release.wheels["nvidia-cudnn-cu12"] == release.cudnn
    assert release.wheels["nvidia-nccl-cu12"] == release.nccl
    assert all(name.startswith("nvidia-") and name.endswith("-cu12") for name in release.wheels)
    assert all(re.fullmatch(r"\d+(\.\d+)+", v) for v in release.wheels.values())
    # the runtime wheel's version starts with the CUDA release the build used
    assert release.wheels["nvidia-cuda-runtime-cu12"].startswith(release.cuda + ".")
    assert version_tuple(release.python_min) < version_tuple(release.python_max)


def test_design_table_facts():
    assert (TF_RELEASES["2.15.1"].cudnn, TF_RELEASES["2.15.1"].nccl) == ("8.9.4.25", "2.16.5")
    assert TF_RELEASES["2.17.1"].cudnn == "8.9.7.29"
    assert TF_RELEASES["2.19.0"].nccl == "2.23.4"
    assert TF_RELEASES["2.20.0"].nccl == "2.25.1"
    assert TF_RELEASES["2.21.0"].python_min == "3.10"
    assert "compute_90" in TF_RELEASES["2.21.0"].cuda_arch
    assert "sm_90" not in TF_RELEASES["2.21.0"].cuda_arch


def test_driver_tables():
    assert CUDA_MIN_DRIVER["12.5"] == "555.42.02"
    assert CUDA_MIN_DRIVER["13.0"] == "580.65.06"
    assert {b for b, info in DRIVER_BRANCHES.items() if info.long_term} == {535, 580, 620}
    assert [b for b, info in DRIVER_BRANCHES.items() if info.last_for_pre_turing] == [580]
    assert not DRIVER_BRANCHES[590].names_have_branch
    for branch, info in DRIVER_BRANCHES.items():
        assert info.latest.startswith(f"{branch}.")


def test_gpu_table():
    assert gpu_by_device_id("0x2330") is GPUS["2330"]
    assert gpu_by_device_id("10DE:2330").compute_capability == (9, 0)
    assert gpu_by_device_id("ffff") is None
    assert GPUS[V100].open_modules == "unsupported"
    assert GPUS[B200].open_modules == "required"
    assert GPUS[T4].bf16_tensor_cores is False and GPUS[T4].fp16_tensor_cores is True
    assert "bf16" not in GPUS[V100].peak_tflops
    assert GPUS[NVSWITCH_H100].is_nvswitch
    names = " ".join(g.name for g in GPUS.values())
    for model in ("V100", "T4", "A10", "A10G", "A30", "A100", "L4", "L40S", "H100", "H200", "B200"):
        assert model in names


def test_repo_names():
    assert nvidia_repo_distro("ubuntu", "20.04") == "ubuntu2004"
    assert nvidia_repo_distro("Ubuntu", "24.04") == "ubuntu2404"
    assert nvidia_repo_distro("debian", "12.7") == "debian12"
    assert nvidia_repo_arch("aarch64") == "sbsa"
    assert nvidia_repo_arch("x86_64") == "x86_64"
    with pytest.raises(MatrixError, match=r"ubuntu 18\.04 is not supported"):
        nvidia_repo_distro("ubuntu", "18.04")
    with pytest.raises(MatrixError, match="'ppc64le' is not supported"):
        nvidia_repo_arch("ppc64le")


# --- acceptance ------------------------------------------------------------------------


def test_tf221_h100_resolves_to_concrete_versions():
    r = ubuntu(gpu_device_ids=[H100])
    assert (r.cuda, r.cudnn, r.nccl) == ("12.5", "9.3.0.75", "2.27.7")
    assert r.min_driver == "555.42.02"
    assert r.driver_branch == 580 and r.kernel_module_flavor == "open"
    assert r.pinning_package == "nvidia-driver-pinning-580"
    assert r.driver_packages == ["nvidia-open"]
    assert r.cuda_toolkit_package == "cuda-toolkit-12-5"
    assert "libcudnn9-cuda-12=9.3.0.75-1" in r.cudnn_packages
    assert r.repo_distro == "ubuntu2204" and own(r.warnings) == []
    # The record leaves only DCGM's 1:4.5.1-1 builds of -cuda13 and -proprietary unsettled.
    assert r.warnings and all("datacenter-gpu-manager-4-" in w for w in r.warnings)


def test_tf221_h100_branch_535_refused_with_fix():
    (message,) = conflicts_of(gpu_device_ids=[H100], driver_branch=535)
    assert "TensorFlow 2.21.0" in message and "driver branch 535" in message
    assert "sm_90" in message and "compute_90 PTX" in message and "PTX JIT" in message
    assert "minor-version compatibility" in message
    assert "555.42.02" in message and "Fix: set driver_branch to 555 or newer" in message


def test_tf221_a100_branch_535_allowed_with_warning():
    r = ubuntu(gpu_device_ids=[A100], driver_branch=535)
    assert r.driver_branch == 535 and r.pinning_package is None
    # NVIDIA's repository packages no open modules for R535: auto falls back to proprietary
    assert r.driver_packages == ["cuda-drivers-535"] and r.kernel_module_flavor == "proprietary"
    (warning,) = own(r.warnings)
    assert "minor-version compatibility" in warning and "555.42.02" in warning


def test_h100_on_branch_535_is_fine_when_tf_was_built_for_cuda_12_2():
    r = ubuntu("2.15.1", gpu_device_ids=[H100], driver_branch=535)
    assert own(r.warnings) == []


# --- conflicts -------------------------------------------------------------------------


def test_unknown_tf_lists_known_releases():
    (message,) = conflicts_of(tf="2.14.0")
    assert "'2.14.0' is not in the version matrix" in message
    assert "2.15.1" in message and "2.21.0" in message


def test_python_outside_range():
    (message,) = conflicts_of(python_version="3.9")
    assert "supports Python 3.10 to 3.13, not 3.9" in message
    assert ubuntu("2.20.0", python_version="3.9").python_min == "3.9"


def test_python_outside_every_release_says_so_and_names_conda():
    # review §3 row 20: "pick a TensorFlow release that supports 3.8" when none does
    (message,) = conflicts_of(python_version="3.8")
    assert "no TensorFlow release gpufleet knows supports 3.8; they take 3.9 to " in message
    assert "python_env = 'conda' or use_uv = True" in message
    assert "pick a TensorFlow release" not in message
    (message,) = conflicts_of(python_version="3.9")
    assert "or tf_version = '2.20.0' (the newest that supports 3.9)" in message


def test_bad_python_version_string():
    (message,) = conflicts_of(python_version="three")
    assert "not a version" in message


def test_proprietary_refused_on_blackwell():
    (message,) = conflicts_of(gpu_device_ids=[B200], kernel_module_flavor="proprietary")
    assert "cannot drive NVIDIA B200" in message and "open" in message


def test_open_refused_on_volta():
    (message,) = conflicts_of(gpu_device_ids=[V100], kernel_module_flavor="open")
    assert "does not support Tesla V100" in message and "proprietary" in message


def test_volta_auto_is_proprietary_on_580():
    r = ubuntu(gpu_device_ids=[V100])
    assert r.kernel_module_flavor == "proprietary" and r.driver_branch == 580
    assert r.driver_packages == ["cuda-drivers"]


def test_branches_after_580_drop_volta():
    (message,) = conflicts_of(gpu_device_ids=[V100], driver_branch=590)
    assert "branch 590 no longer supports Tesla V100" in message
    assert "Fix: set driver_branch to 580" in message


def test_blackwell_needs_570_and_auto_picks_580():
    (message,) = conflicts_of(gpu_device_ids=[B200], driver_branch=560)
    assert "NVIDIA B200 needs driver branch 570" in message
    assert ubuntu(gpu_device_ids=[B200]).driver_branch == 580


def test_volta_and_blackwell_cannot_share_a_host():
    messages = conflicts_of(gpu_device_ids=[V100, B200])
    assert any("put these GPUs in different hosts" in m for m in messages)


def test_unknown_flavor():
    (message,) = conflicts_of(kernel_module_flavor="nouveau")
    assert "'nouveau' is not one of auto, open, proprietary" in message


def test_unknown_driver_branch():
    (message,) = conflicts_of(driver_branch=999)
    assert "driver_branch 999 is not in the matrix" in message


def test_unsupported_os_and_arch_collected_together():
    messages = conflicts_of(os_id="centos", os_version="7", arch="ppc64le", python_version="2.7")
    assert len(messages) == 3
    error = MatrixError(messages)
    assert str(error).startswith("3 version conflicts:")


def test_cuda_override():
    r = ubuntu(cuda_version="12.8")
    assert r.cuda == "12.8" and r.tf_cuda == "12.5"
    assert r.cuda_toolkit_package == "cuda-toolkit-12-8"
    (message,) = conflicts_of(cuda_version="13.0", driver_branch=570)
    assert "needs driver >= 580.65.06" in message
    (message,) = conflicts_of(cuda_version="11.8")
    assert "cuda_version '11.8' is not in the matrix" in message
    assert "minor-version" in own(ubuntu(cuda_version="12.8", driver_branch=550).warnings)[-1]


def test_nvswitch_adds_fabric_manager_at_branch():
    # From R580 Fabric Manager is the unsuffixed package; nvidia-fabricmanager-580 is only a
    # name it provides (NVIDIA/gpu-driver-container#451).
    r = ubuntu(gpu_device_ids=[H100] * 8 + [NVSWITCH_H100] * 4)
    assert r.fabricmanager_package == "nvidia-fabricmanager"
    assert r.fabric_packages == ["nvidia-fabricmanager", "libnvidia-nscq"]
    assert r.gpu_names == ("NVIDIA H100 80GB HBM3",) and r.has_nvswitch
    r = ubuntu(gpu_device_ids=[H100, NVSWITCH_H100], driver_branch=575)
    assert r.fabric_packages == ["nvidia-fabricmanager-575", "libnvidia-nscq-575"]
    r = ubuntu(gpu_device_ids=[H100, NVSWITCH_H100], driver_branch=590)
    assert r.fabricmanager_package == "nvidia-fabricmanager"
    assert ubuntu(gpu_device_ids=[H100]).fabricmanager_package is None


def test_hgx_b200_gets_fabric_manager_and_nvlsm_by_its_gpu_id():
    r = ubuntu(gpu_device_ids=["2901"] * 8)
    assert not r.has_nvswitch and r.nvlink5
    assert r.fabric_packages == ["nvidia-fabricmanager", "libnvidia-nscq", "nvlsm", "libnvsdm"]
    (message,) = conflicts_of(gpu_device_ids=["2901"], os_version="20.04")
    assert "nvlsm" in message and "Ubuntu 22.04 or 24.04" in message


@pytest.mark.parametrize("tf", ["2.15.1", "2.16.2", "2.17.1"])
def test_tf_before_2_18_is_refused_on_ubuntu_24_04_naming_why_and_the_fix(tf):
    messages = conflicts_of(tf=tf, os_version="24.04")
    assert any("never published for Ubuntu 24.04" in m and "Fix" in m for m in messages)
    assert ubuntu(tf).cuda_toolkit_package in ("cuda-toolkit-12-2", "cuda-toolkit-12-3")


def test_dcgm_follows_the_driver_cuda_major_volta_keeps_cuda12():
    assert "datacenter-gpu-manager-4-cuda13=1:4.5.1-1" in ubuntu().dcgm_packages
    volta = ubuntu(gpu_device_ids=["1db1"]).dcgm_packages
    assert "datacenter-gpu-manager-4-cuda12=1:4.5.1-1" in volta
    assert "datacenter-gpu-manager-4-proprietary-cuda12=1:4.5.1-1" in volta
    assert "datacenter-gpu-manager-4-cuda12=1:4.5.1-1" in ubuntu(driver_branch=570).dcgm_packages
    assert resolve("2.21.0", os_id="ubuntu", os_version="20.04").dcgm_packages == []


def test_unknown_device_id_warns():
    r = ubuntu(gpu_device_ids=["abcd"])
    assert any("10de:abcd is not in the GPU table" in w for w in r.warnings)


def test_old_tf_packages():
    r = ubuntu("2.16.1", gpu_device_ids=[A100])
    assert r.cudnn_packages == [
        "libcudnn8=8.9.7.29-1+cuda12.2",
        "libcudnn8-dev=8.9.7.29-1+cuda12.2",
    ]
    assert r.cuda_toolkit_package == "cuda-toolkit-12-3"


def test_aarch64_repo():
    r = resolve("2.21.0", os_id="ubuntu", os_version="24.04", arch="aarch64")
    assert (r.repo_distro, r.repo_arch) == ("ubuntu2404", "sbsa")
    assert own(r.warnings) == []


def test_aarch64_with_gpus_is_refused_naming_ngc_unless_no_cuda_build_is_required():
    (message,) = conflicts_of(arch="aarch64", gpu_device_ids=[H100])
    assert "aarch64 are built without CUDA" in message and "NGC" in message
    (message,) = conflicts_of(arch="aarch64", gpu_device_ids=["2342"])  # GH200: not in the table
    assert "NGC" in message
    r = resolve(
        "2.21.0",
        os_id="ubuntu",
        os_version="22.04",
        arch="aarch64",
        gpu_device_ids=[H100],
        require_cuda_build=False,
    )
    assert any("aarch64 are built without CUDA" in w for w in r.warnings)


# --- constraints files -----------------------------------------------------------------


# --- apt names -------------------------------------------------------------------------------


def test_branch_535_has_no_open_package_in_nvidia_repo():
    (message,) = conflicts_of(gpu_device_ids=[A100], driver_branch=535, kernel_module_flavor="open")
    assert "no open-module package for R535" in message and "proprietary" in message


def test_driver_package_names_per_branch():
    assert ubuntu(gpu_device_ids=[A100], driver_branch=550).driver_packages == [
        "nvidia-driver-550-open"
    ]
    r = ubuntu(gpu_device_ids=[A100], driver_branch=570)
    assert r.driver_packages == ["nvidia-open-570"] and r.pinning_package is None
    r = ubuntu(gpu_device_ids=[V100], driver_branch=575)
    assert r.driver_packages == ["cuda-drivers-575"]
    r = ubuntu(gpu_device_ids=[A100], driver_branch=595)
    assert (r.driver_packages, r.pinning_package) == (["nvidia-open"], "nvidia-driver-pinning-595")


def test_nccl_build_choice():
    assert nccl_build_for("2.25.1", "12.5") == "12.4"
    assert nccl_build_for("2.25.1", "12.8") == "12.8"
    assert nccl_build_for("2.27.7", "12.5") == "12.9"  # no older 12.x build exists
    assert nccl_build_for("2.27.7", "13.0") == "13.0"
    assert nccl_build_for("2.21.5", "13.0") is None
    assert nccl_build_for("9.9.9", "12.5") is None
    r = ubuntu("2.18.0")
    assert r.nccl_packages == ["libnccl2=2.21.5-1+cuda12.4", "libnccl-dev=2.21.5-1+cuda12.4"]


def test_unpinned_nccl_is_said_not_hidden():
    r = ubuntu("2.18.0", cuda_version="13.0")
    assert r.nccl_packages == ["libnccl2", "libnccl-dev"]
    assert any("NCCL 2.21.5" in w and "unpinned" in w for w in r.warnings)
