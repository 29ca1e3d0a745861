"""GH200 and GB200 in the GPU table: found by id and name, open modules only, arm64 refused by
default (PyPI's aarch64 TensorFlow has no CUDA), no invented datasheet figures."""

from __future__ import annotations

import pytest

from gpufleet import matrix
from gpufleet.matrix.gpu_lookup import find_gpu, lookup

GH200, GB200 = "2342", "2941"


def ids(text: str) -> list[str]:
    return [m.device_id for m in lookup(text)]


def test_grace_superchips_are_found_by_id_and_name() -> None:
    assert ids("10de:2342") == ids("GH200") == [GH200]
    assert find_gpu("NVIDIA GH200 480GB").device_id == GH200
    assert ids("0x2941") == ids("GB200") == [GB200]
    assert ids("B200") == ["2901"] and ids("H200") == ["2335"]  # never the Grace parts


def test_no_datasheet_figures_are_recorded_for_them() -> None:
    for device_id in (GH200, GB200):
        model = matrix.GPUS[device_id]
        assert model.peak_tflops == {} and model.datasheet == ""
        assert model.open_modules == "required" and not model.nvlink5_fabric


def test_an_arm64_grace_host_is_refused_while_a_cuda_tensorflow_is_required() -> None:
    for device_id in (GH200, GB200):
        with pytest.raises(matrix.MatrixError, match="NGC containers"):
            matrix.resolve(
                "2.21.0",
                os_id="ubuntu",
                os_version="24.04",
                arch="aarch64",
                gpu_device_ids=[device_id] * 4,
            )


@pytest.mark.parametrize("device_id", [GH200, GB200])
def test_without_a_cuda_tensorflow_the_driver_is_open_modules_from_sbsa(device_id: str) -> None:
    r = matrix.resolve(
        "2.21.0",
        os_id="ubuntu",
        os_version="24.04",
        arch="aarch64",
        gpu_device_ids=[device_id] * 4,
        require_cuda_build=False,
    )
    assert r.repo_arch == "sbsa" and r.kernel_module_flavor == "open"
    assert r.driver_branch >= 580 and r.fabric_packages == []
    with pytest.raises(matrix.MatrixError, match="open kernel modules"):
        matrix.resolve(
            "2.21.0",
            os_id="ubuntu",
            os_version="24.04",
            arch="aarch64",
            gpu_device_ids=[device_id],
            kernel_module_flavor="proprietary",
            require_cuda_build=False,
        )


def test_gb200_needs_a_branch_with_cuda_12_8() -> None:
    with pytest.raises(matrix.MatrixError, match="NVIDIA GB200 needs driver branch 570 or newer"):
        matrix.resolve(
            "2.21.0",
            os_id="ubuntu",
            os_version="22.04",
            arch="aarch64",
            gpu_device_ids=[GB200],
            driver_branch=560,
            require_cuda_build=False,
        )
