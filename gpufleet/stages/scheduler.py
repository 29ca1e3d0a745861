"""Slurm integration: gres.conf for the GPUs on the PCI bus, gpufleet's health check in Slurm."""

from __future__ import annotations

import json
import shlex

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.server import Which
from pyinfra.operations import files, server

from gpufleet.operations import files as gpufleet_files
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.stages.validation_payload import payload_paths

SLURM_CONF = "/etc/slurm/slurm.conf"
GRES_CONF = "/etc/slurm/gres.conf"
HEALTHCHECK = "/usr/local/sbin/gpufleet-healthcheck"
HEALTHCHECK_CONFIG = "/etc/gpufleet/healthcheck.json"
# The system Python, not the TensorFlow environment: the check must start fast and must not
# depend on the environment it may be judging.
PYTHON = "/usr/bin/python3"


def gres_conf(gpu_count: int) -> str:
    """gres.conf for this node's GPUs by device file. Debian's and Ubuntu's Slurm has no NVML
    plugin (no gpu_nvml.so), so ``AutoDetect=nvml`` cannot work there.

    Example: ``gres_conf(8)`` -> ``"Name=gpu File=/dev/nvidia[0-7]"`` plus a comment line.
    """
    files_expr = "/dev/nvidia0" if gpu_count == 1 else f"/dev/nvidia[0-{gpu_count - 1}]"
    return (
        "# Managed by gpufleet (scheduler_integration): the GPUs on this host's PCI bus\n"
        f"Name=gpu File={files_expr}\n"
    )


def healthcheck_config(plan: NodePlan) -> str:
    """What the on-host check compares against: the pinned branch, packages and services."""
    resolution = plan.require_resolution()
    spec = plan.spec
    data = {
        "host": host.name,
        "gpu_less": spec.gpu_less,
        "gpu_count": spec.gpu_count,
        "driver_branch": resolution.driver_branch,
        "driver_packages": [p.split("=", 1)[0] for p in resolution.driver_packages],
        "pinning_package": resolution.pinning_package,
        "persistenced": spec.persistenced,
        "fabric_manager": spec.fabric_manager,
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def healthcheck_script(payload_dir: str) -> str:
    """The program slurm.conf's HealthCheckProgram names (root-owned, 755)."""
    _, current = payload_paths(payload_dir)
    return (
        "#!/bin/sh\n"
        "# gpufleet's fast node health check; drains/resumes this node (README, Slurm)\n"
        "# slurmd runs it with a minimal environment: name the tools' directories\n"
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        "export PATH\n"
        f"PYTHONPATH={shlex.quote(current)} exec {PYTHON} -m validation.host.healthcheck "
        f'--config {HEALTHCHECK_CONFIG} --slurm "$@"\n'
    )


def slurm_lines(interval_s: int) -> dict[str, str]:
    """slurm.conf keys the stage sets (the same on every node, as Slurm wants)."""
    return {
        "HealthCheckProgram": HEALTHCHECK,
        "HealthCheckInterval": str(interval_s),
        "HealthCheckNodeState": "ANY",
    }


def skip_reason(plan: NodePlan, has_slurmd: bool) -> str | None:
    if plan.spec.scheduler != "slurm":
        return f"scheduler: {plan.spec.scheduler} (set scheduler: slurm to integrate)"
    if not has_slurmd:
        return "slurmd is not installed on this host (install Slurm first)"
    return None


@deploy("gpufleet scheduler_integration")
def scheduler_integration(plan: NodePlan | None = None):
    """
    On a host that runs slurmd (``scheduler: slurm``): ``gres.conf`` naming the GPUs found on
    the PCI bus, gpufleet's fast health check installed and named in ``slurm.conf`` as
    ``HealthCheckProgram`` (every ``slurm_health_interval`` s), slurmd restarted when either
    changed. A GPU-less host keeps its gres.conf.

    .. code:: python

        scheduler_integration()
    """
    plan = plan or node_plan()
    has_slurmd = bool(host.get_fact(Which, command="slurmd"))
    why_not = skip_reason(plan, has_slurmd)
    if why_not:
        host.noop(f"scheduler integration skipped: {why_not}")
        return
    gpu_count = len(plan.state.gpus)
    gres = None
    if gpu_count:
        gres = gpufleet_files.content(
            name=f"{GRES_CONF}: {gpu_count} GPU(s) by device file",
            path=GRES_CONF,
            text=gres_conf(gpu_count),
        )
    else:
        host.noop(f"{GRES_CONF} left as it is: no NVIDIA GPU on the PCI bus")
    gpufleet_files.content(
        name=f"{HEALTHCHECK_CONFIG}: what the health check expects",
        path=HEALTHCHECK_CONFIG,
        text=healthcheck_config(plan),
    )
    gpufleet_files.content(
        name=f"{HEALTHCHECK}: the health check program",
        path=HEALTHCHECK,
        text=healthcheck_script(plan.spec.payload_dir),
        mode="755",
    )
    changed = [gres] if gres is not None else []
    for key, value in slurm_lines(plan.spec.slurm_health_interval).items():
        changed.append(
            files.line(
                name=f"{SLURM_CONF}: {key}={value}",
                path=SLURM_CONF,
                line=f"^{key}=.*$",
                replace=f"{key}={value}",
            )
        )

    def any_changed() -> bool:
        return any(op.did_change() for op in changed)

    # slurmctld reads slurm.conf too (the hash of every node's copy must match its own); only
    # the controller has it, and `systemctl try-restart` of a unit that does not exist fails.
    commands = ["systemctl restart slurmd"]
    if host.get_fact(Which, command="slurmctld"):
        commands.append("systemctl try-restart slurmctld")
    server.shell(
        name="slurmd (and slurmctld where it runs) restarted for the new configuration",
        commands=commands,
        _if=any_changed,
    )
