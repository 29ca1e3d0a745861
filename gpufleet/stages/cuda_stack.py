"""System CUDA toolkit, cuDNN and NCCL at the matrix's versions, each pinned and optional."""

from __future__ import annotations

from pyinfra.api import deploy

from gpufleet.operations import apt as gpufleet_apt
from gpufleet.stages import fleet_cache, op_keys
from gpufleet.stages.node import NodePlan, node_plan


@deploy("gpufleet cuda_stack")
def cuda_stack(plan: NodePlan | None = None):
    """
    Install the system CUDA toolkit, cuDNN and NCCL (runtime and dev) of the resolved
    versions and hold them; each is skipped when its ``install_*`` key is off.

    .. code:: python

        cuda_stack()
    """
    plan = plan or node_plan()
    spec, resolution = plan.spec, plan.require_resolution()
    if spec.install_cuda_toolkit:
        # The package name carries the minor version (cuda-toolkit-12-5): that is its pin.
        fleet_cache.install(
            plan,
            name="system CUDA toolkit",
            packages=[resolution.cuda_toolkit_package],
        )
    on_hold = sorted(plan.state.held)  # read by the probe: no round trip per package
    # Each group is held by the command that installs it, and its hold operations follow at
    # once: a failed NCCL install never leaves cuDNN installed but unheld.
    if spec.install_cudnn:
        fleet_cache.install(
            plan,
            name="cuDNN runtime and dev, pinned",
            packages=resolution.cudnn_packages,
            allow_change=True,
            hold=True,
        )
        _held(resolution.cudnn_packages, on_hold)
    if spec.install_nccl:
        fleet_cache.install(
            plan,
            name="NCCL runtime and dev, pinned",
            packages=resolution.nccl_packages,
            allow_change=True,
            hold=True,
        )
        _held(resolution.nccl_packages, on_hold)


def _held(packages: list[str], on_hold: list[str]) -> None:
    """One hold operation per package, so a plan names the one that is no longer held."""
    for package in op_keys.each(p.split("=", 1)[0] for p in packages):
        gpufleet_apt.held(name=f"{package} held", package=package, on_hold=on_hold)
