"""The pyinfra inventory of a running sandbox: its hosts, and data pointing at the stand-ins."""

from __future__ import annotations

import os
from typing import Any

from gpufleet.matrix.os_python import newest_tf_for
from gpufleet.sandbox.image import IMAGES
from gpufleet.sandbox.state import SandboxState

# Names a host (or a comma-separated list) that inventories/sandbox.py declares as a GPU server
# although it has no GPU, so that preflight refuses it ("no NVIDIA GPU on the PCI bus"): the
# end-to-end tests' bad host among good ones.
REFUSE_ENV = "GPUFLEET_SANDBOX_REFUSE"
# Names the host inventories/sandbox.py puts in group gpufleet_cache (the fleet cache): the other
# hosts then download the stand-ins through it, and only the cache host is given their URLs.
CACHE_ENV = "GPUFLEET_SANDBOX_CACHE"
# The keys that point at the stand-ins: the cache's upstreams when there is a cache.
UPSTREAM_KEYS = ("nvidia_repo_url", "nvidia_repo_key_url", "pip_index_url", "pip_trusted_host")


def group_data(state: SandboxState) -> dict[str, Any]:
    """Data of every sandbox host: the deploy's URLs point at the gateway's stand-ins.

    Example::

        group_data(load_state())["pip_index_url"]   # "http://10.231.7.1:8631/simple"
    """
    data: dict[str, Any] = {
        # Sandbox hosts have no GPU on their PCI bus and cannot run CUDA: CPU-only TensorFlow.
        "gpu_less": True,
        "python_env": "venv",  # Miniforge cannot be fetched here; the image's python3 can
        "tensorflow_package": "tensorflow-cpu",
        "require_cuda_build": False,
        "reboot": "never",  # tests that exercise reboots override it
        "min_free_disk_gib": 2,
        # The periodic checks' Prometheus textfile (prometheus-node-exporter, via the apt proxy).
        "node_exporter": True,
        # No data-centre GPU here, so `auto` would skip DCGM: install its stand-ins all the same.
        "dcgm": "on",
    }
    data.update(os_data(state.image))
    if state.slurm_controller:  # `sandbox up --slurm`: slurmctld on the first host
        data.update(scheduler="slurm", slurm_controller=state.slurm_controller)
    if state.nvidia_repo_url:
        data.update(
            nvidia_repo_url=state.nvidia_repo_url,
            nvidia_repo_key_url=state.nvidia_repo_key_url,
            nvidia_repo_key_fingerprint=state.nvidia_repo_key_fingerprint,
            pip_index_url=state.pip_index_url,
            pip_trusted_host=state.gateway,  # plain HTTP on a private address
        )
    return data


def os_data(image_name: str) -> dict[str, Any]:
    """What the image's OS needs besides the defaults: the venv's interpreter, the newest
    TensorFlow the matrix has wheels for on it, and the newest driver branch NVIDIA publishes
    for it (inventories/group_data/all.py pins 580, which ubuntu2004 does not have).

    Example: ``os_data("ubuntu20.04") == {"python_interpreter": "python3.9",
    "tf_version": "2.20.0", "driver_branch": 575}`` (focal's python3 is 3.8; TF 2.21 needs 3.10).
    """
    from gpufleet import matrix
    from gpufleet.spec import NodeSpec

    image = IMAGES.get(image_name)
    if image is None:
        return {}
    data: dict[str, Any] = {}
    if image.python_interpreter != "python3":
        data["python_interpreter"] = image.python_interpreter
    newest = newest_tf_for(image.python_version)
    if newest is not None and newest != NodeSpec().tf_version:
        data["tf_version"] = newest
    distro = matrix.nvidia_repo_distro(image.os_id, image.os_version)
    if distro in matrix.REPO_NEWEST_BRANCH:
        data["driver_branch"] = matrix.REPO_NEWEST_BRANCH[distro]
    return data


def cache_host(state: SandboxState, value: str | None = None) -> str | None:
    """The host GPUFLEET_SANDBOX_CACHE (or `value`) names, checked against the sandbox."""
    name = (os.environ.get(CACHE_ENV, "") if value is None else value).strip()
    if not name:
        return None
    if name not in {host.name for host in state.hosts}:
        raise ValueError(
            f"{CACHE_ENV} names {name}, which this sandbox does not have "
            f"(hosts: {', '.join(h.name for h in state.hosts)})"
        )
    return name


def cache_groups(state: SandboxState, cache: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """With a fleet cache on host `cache`: (data of every host, data of the cache group). The
    stand-ins' URLs go to the cache alone, as its upstreams; every host keeps the OS archive on
    the gateway's apt-cacher-ng (the sandbox image's apt proxy: the hosts reach nothing else)."""
    everyone = group_data(state)
    upstreams = {key: everyone.pop(key) for key in UPSTREAM_KEYS if key in everyone}
    everyone["cache_os_archive"] = False
    return everyone, upstreams


def refused_hosts(value: str | None = None) -> set[str]:
    """Host names from GPUFLEET_SANDBOX_REFUSE (or `value`): ``"gfsb-h4"`` -> ``{"gfsb-h4"}``."""
    raw = os.environ.get(REFUSE_ENV, "") if value is None else value
    return {name.strip() for name in raw.split(",") if name.strip()}


def host_entries(state: SandboxState, refused: set[str] | None = None) -> list[tuple[str, dict]]:
    """``(name, host data)`` per host, with how pyinfra reaches it over SSH."""
    refused = refused_hosts() if refused is None else refused
    unknown = refused - {host.name for host in state.hosts}
    if unknown:
        raise ValueError(
            f"{REFUSE_ENV} names {', '.join(sorted(unknown))}, which this sandbox does not have "
            f"(hosts: {', '.join(h.name for h in state.hosts)})"
        )
    entries = []
    for host in state.hosts:
        data: dict[str, Any] = {
            "ssh_hostname": host.address,
            "ssh_port": host.port,
            "ssh_user": host.user,
            "ssh_key": host.ssh_key,
            "ssh_known_hosts_file": host.known_hosts,
            "ssh_strict_host_key_checking": "yes",  # host keys are generated and known
            "ssh_allow_agent": False,
            "ssh_look_for_keys": False,
        }
        if host.name in refused:
            data["gpu_less"] = False  # declared a GPU server: preflight must refuse it
        entries.append((host.name, data))
    return entries
