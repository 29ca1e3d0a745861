"""The first and last stages of a run: the host's deploy lock and dpkg repair, then the reboot."""

from __future__ import annotations

from pyinfra.api import deploy

from gpufleet.operations import connection, dpkg, kernel, lock
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.stamp.record import bookkeeping


@deploy("gpufleet run_start")
def run_start(plan: NodePlan | None = None):
    """
    Take the host's deploy lock (a second deploy of the host is refused) and finish the work of
    an interrupted dpkg before any apt operation.

    .. code:: python

        if preflight(plan=plan):
            run_start(plan=plan)
    """
    plan = plan or node_plan()
    connection.watch()
    # Taken and released on every run: bookkeeping, so a run that changes nothing else is stamped.
    bookkeeping(lock.deploy_lock(name="deploy lock taken (one gpufleet deploy per host)"))
    dpkg.repaired(
        name="dpkg repaired (an interrupted dpkg finished before apt runs)",
        problems=plan.state.dpkg_problems,
    )


@deploy("gpufleet run_end")
def run_end(plan: NodePlan | None = None):
    """
    Release the deploy lock, then reboot per the reboot policy. Last in the run but for XLA's
    warm-up (gpufleet.stages.xla_warm_up, which needs the driver this boots): pyinfra runs an
    operation on every host before the next one, so a host that does not come back costs the
    others only this wait.

    .. code:: python

        run_end(plan=plan)
    """
    plan = plan or node_plan()
    bookkeeping(lock.deploy_lock_released(name="deploy lock released"))
    kernel.reboot_for_driver(
        name="reboot if the running driver is not the installed one (reboot policy)",
        policy=plan.spec.reboot,
        reboot_timeout=plan.spec.reboot_timeout_s,
    )
