"""Whether a host needs Fabric Manager, and which fabric packages it gets."""

from __future__ import annotations

from gpufleet.matrix.apt_names import fabric_package_names
from gpufleet.stages.node import NodePlan


def wants_fabric_manager(plan: NodePlan) -> bool:
    """``fabric_manager: on``, or ``auto`` with NVSwitches on the PCI bus or GPUs that only
    ship on NVLink 5 boards (HGX B200, whose switches are not on the host's bus)."""
    spec, resolution = plan.spec, plan.require_resolution()
    if spec.fabric_manager == "auto":
        return plan.state.has_nvswitch or resolution.nvlink5
    return spec.fabric_manager == "on"


def fabric_packages(plan: NodePlan) -> list[str]:
    """The resolution's fabric packages (Fabric Manager first), or, for ``fabric_manager: on``
    on a host the matrix saw no fabric on, Fabric Manager and NSCQ of the branch."""
    resolution = plan.require_resolution()
    if resolution.fabric_packages:
        return list(resolution.fabric_packages)
    return fabric_package_names(
        resolution.driver_branch, nvlink5=False, repo_arch=resolution.repo_arch
    )
