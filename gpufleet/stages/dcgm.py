"""NVIDIA DCGM on the host: datacenter-gpu-manager-4 pinned and held, nvidia-dcgm running."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import systemd

from gpufleet.matrix import gpu_by_device_id
from gpufleet.matrix.dcgm import DCGM_SERVICE, dcgm_unsupported_reason
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.stages import fleet_cache, op_keys
from gpufleet.stages.node import NodePlan, node_plan


@deploy("gpufleet dcgm")
def dcgm(plan: NodePlan | None = None):
    """
    Install NVIDIA DCGM (``datacenter-gpu-manager-4-core``, the ``-cuda<major>`` package of the
    driver's CUDA major and the proprietary packages it pulls) at the matrix's version, hold
    them, and keep ``nvidia-dcgm`` enabled and running, so that ``dcgmi diag`` can run in the
    validation suite. With ``dcgm: auto`` only hosts with data-centre GPUs get it; the plan
    says why a host does not.

    .. code:: python

        dcgm()
    """
    plan = plan or node_plan()
    why_not = skip_reason(plan)
    if why_not:
        host.noop(f"DCGM not installed: {why_not}")
        return
    packages = plan.require_resolution().dcgm_packages  # the driver's CUDA major, pinned
    fleet_cache.install(
        plan,
        name="DCGM (datacenter-gpu-manager-4), pinned",
        packages=packages,
        allow_change=True,
    )
    on_hold = sorted(plan.state.held)  # read by the probe: no round trip per package
    for package in op_keys.each(p.split("=", 1)[0] for p in packages):
        gpufleet_apt.held(name=f"{package} held", package=package, on_hold=on_hold)
    systemd.service(
        name=f"{DCGM_SERVICE} enabled", service=DCGM_SERVICE, running=None, enabled=True
    )
    systemd.service(name=f"{DCGM_SERVICE} running", service=DCGM_SERVICE, running=True)


def skip_reason(plan: NodePlan) -> str | None:
    """Why this host gets no DCGM (the ``dcgm`` key, its GPUs, its distribution), else None.

    Example: ``skip_reason(plan)`` -> ``"dcgm: off"`` or ``None``.
    """
    wanted = plan.spec.dcgm
    if wanted == "off":
        return "dcgm: off"
    unsupported = dcgm_unsupported_reason(plan.require_resolution().repo_distro)
    if unsupported:
        return unsupported
    if wanted == "auto":
        datacenter = [
            d for d in plan.state.gpus if (m := gpu_by_device_id(d.device_id)) and not m.is_nvswitch
        ]
        if not datacenter:
            return "no data-centre GPU on the PCI bus (dcgm: auto); set dcgm: on to install it"
    return None
