"""After the reboot: XLA's compile cache warmed, so the first validation run compiles nothing."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import deploy

from gpufleet.operations import xla_cache
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.stages.python_env import WRAPPER
from gpufleet.stages.validation_payload import payload_archive, payload_paths
from validation.workloads.xla_cache import ROOT_DIRECTORY


def warm_marker(plan: NodePlan) -> str:
    """The marker a warm cache holds on this host: its TensorFlow, this payload, its GPUs."""
    spec, resolution = plan.spec, plan.require_resolution()
    payload = hashlib.sha256(payload_archive()).hexdigest()
    tensorflow = f"{spec.tensorflow_package}=={resolution.tf_version}"
    return xla_cache.marker_text(tensorflow, payload, [d.device_id for d in plan.state.gpus])


@deploy("gpufleet xla_warm_up")
def xla_warm_up(plan: NodePlan | None = None):
    """
    Compile every XLA step the quick and full validation tiers run into root's XLA cache
    (``/var/cache/gpufleet/xla-compile-cache``: the periodic unit's, and every root process's
    through env.sh), once per TensorFlow version, payload and GPU set. After the reboot, the
    first moment a freshly installed driver serves the GPUs; a no-op without GPUs.

    .. code:: python

        run_end(plan=plan)
        xla_warm_up(plan=plan)
    """
    plan = plan or node_plan()
    if plan.spec.gpu_less or not plan.state.gpus:
        why = "gpu_less" if plan.spec.gpu_less else "none on the PCI bus"
        host.noop(f"no GPU ({why}): no XLA cache to warm")
        return
    _, current = payload_paths(plan.spec.payload_dir)
    xla_cache.warmed(
        name="XLA's compile cache warmed: every compiled step of the quick and full tiers",
        python=WRAPPER,
        payload_dir=current,
        cache_dir=ROOT_DIRECTORY,
        marker=warm_marker(plan),
    )
