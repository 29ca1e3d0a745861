"""Checks of inventory values that only make sense together (run once each value passed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet import matrix
from gpufleet.spec.python_checks import python_env_errors

if TYPE_CHECKING:
    from gpufleet.spec.model import NodeSpec


def combination_errors(spec: NodeSpec) -> list[str]:
    """Checks of values that only make sense together (e.g. ``secure_boot_plan`` and MOK paths)."""
    errors = []
    if spec.secure_boot_plan == "mok" and not (spec.mok_key_path and spec.mok_cert_path):
        errors.append(
            "secure_boot_plan = 'mok' needs mok_key_path and mok_cert_path. Fix: set both, or "
            "use secure_boot_plan = 'ubuntu-signed' on Ubuntu."
        )
    if spec.gpu_less and spec.gpu_count:
        errors.append(
            f"gpu_less = True contradicts gpu_count = {spec.gpu_count}. Fix: drop one of them."
        )
    errors.extend(python_env_errors(spec))
    errors.extend(nccl_mpi_errors(spec))
    if spec.driver_branch is not None and spec.driver_branch not in matrix.DRIVER_BRANCHES:
        errors.append(
            f"driver_branch = {spec.driver_branch} is not a known branch ("
            f"{', '.join(map(str, matrix.DRIVER_BRANCHES))}). Fix: pick one, or leave it unset."
        )
    if spec.cuda_version is not None and spec.cuda_version not in matrix.CUDA_MIN_DRIVER:
        errors.append(
            f"cuda_version = {spec.cuda_version!r} is not known ("
            f"{', '.join(matrix.CUDA_MIN_DRIVER)}). Fix: pick one, or leave it unset."
        )
    return errors


def nccl_mpi_errors(spec: NodeSpec) -> list[str]:
    """``nccl_tests_mpi`` needs what the MPI build of nccl-tests is built from, and a GPU."""
    if not spec.nccl_tests_mpi:
        return []
    if spec.gpu_less:
        return [
            "nccl_tests_mpi = True on a gpu_less host: all_reduce_perf needs a GPU. Fix: drop "
            "nccl_tests_mpi (the cluster tier reports the NCCL part as 'no GPU' there)."
        ]
    if spec.nccl_tests == "off":
        return ["nccl_tests_mpi = True contradicts nccl_tests = 'off'. Fix: drop one of them."]
    if not (spec.install_cuda_toolkit and spec.install_nccl):
        return [
            "nccl_tests_mpi = True needs the system CUDA toolkit and NCCL to build against. "
            "Fix: keep install_cuda_toolkit and install_nccl on, or drop nccl_tests_mpi."
        ]
    return []
