"""The group the cluster tier runs on: its hosts, their addresses and ports, and TF_CONFIG."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.inventory import InventoryHost

# The TensorFlow workers' gRPC port and iperf3's (its default): both must be open between
# every pair of hosts of a group.
WORKER_PORT = 23456
IPERF3_PORT = 5201
PORTS = (WORKER_PORT, IPERF3_PORT)
_RUN_ID = re.compile(r"[0-9A-Za-z-]{1,64}")
# A training worker's command line as `ps` shows it, for grep (the [v] keeps grep's own line out).
WORKER_PS_PATTERN = "[v]alidation\\.cluster\\.worker"


class ClusterError(ValueError):
    """The group cannot run the cluster tier; the message says what to fix."""


@dataclass(frozen=True)
class ClusterHost:
    """One host of the group as the tier uses it.

    ``address`` is where the other hosts reach it (``cluster_address``, else its SSH host
    name); ``alias`` names it in the run's generated ssh_config.
    """

    name: str
    alias: str
    address: str
    python: str
    payload_dir: str
    interconnect_gbps: int
    gpu_less: bool
    sudo: bool
    textfile_dir: str | None  # None: node_exporter off, no Prometheus textfile
    worker_port: int = WORKER_PORT
    # scheduler: slurm in the inventory: the workers run as srun jobs (gpufleet.cluster.srun)
    slurm: bool = False
    slurm_partition: str | None = None
    gpu_count: int | None = None
    # The cluster tier's NCCL part (gpufleet.cluster.nccl): the MPI build's bin directory (None:
    # nccl_tests_mpi off), the fabric its floor is keyed off, what NCCL should use between hosts.
    nccl_mpi_bin: str | None = None
    fabric_gbps: int = 10
    nccl_transport: str = "auto"
    nccl_socket_ifname: str | None = None
    nccl_ib_hca: str | None = None
    nccl_min_bytes: str = "8"
    nccl_max_bytes: str = "8G"


def cluster_host(host: InventoryHost, alias: str) -> ClusterHost:
    """A host of the group from its inventory entry; raises ClusterError (bad data, @local)."""
    from gpufleet.spec import NodeSpec, SpecError
    from gpufleet.stages.nccl_tests import mpi_dir
    from gpufleet.stages.validation_payload import payload_paths
    from validation.verdicts.expectations import spec_data

    if host.is_local:
        raise ClusterError(
            "the cluster tier runs across hosts over SSH; @local cannot be one of them "
            "(list the hosts in an inventory file)"
        )
    try:
        spec = NodeSpec.from_host_data(spec_data(host.data))
    except SpecError as exc:
        raise ClusterError(f"host {host.name}: {exc}") from None
    return ClusterHost(
        name=host.name,
        alias=alias,
        address=spec.cluster_address or str(host.ssh_hostname),
        python=spec.python_bin,
        payload_dir=payload_paths(spec.payload_dir)[1],
        interconnect_gbps=spec.interconnect_gbps,
        gpu_less=spec.gpu_less,
        sudo=bool(host.data.get("_sudo")),
        textfile_dir=spec.textfile_dir if spec.node_exporter else None,
        slurm=spec.scheduler == "slurm",
        slurm_partition=spec.slurm_partition,
        gpu_count=spec.gpu_count,
        nccl_mpi_bin=f"{mpi_dir(spec.nccl_tests_dir)}/bin" if spec.nccl_tests_mpi else None,
        fabric_gbps=spec.nccl_fabric_gbps or spec.interconnect_gbps,
        nccl_transport=spec.nccl_transport,
        nccl_socket_ifname=spec.nccl_socket_ifname,
        nccl_ib_hca=spec.nccl_ib_hca,
        nccl_min_bytes=spec.nccl_tests_min_bytes,
        nccl_max_bytes=spec.nccl_tests_max_bytes,
    )


def plain_run_id(run_id: str) -> str:
    """``run_id`` itself once checked: it names a directory and Slurm jobs on every host."""
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not letters, digits and '-'")
    return run_id


def group_name(hosts: Sequence[InventoryHost], limits: Sequence[str]) -> str:
    """The group's name: the --limit given, else the first inventory group all hosts share."""
    if limits:
        return ",".join(limits)
    shared = [g for g in hosts[0].groups if all(g in h.groups for h in hosts)] if hosts else []
    return next((g for g in shared if not g.startswith("@")), "all")


def endpoint(address: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets."""
    return f"[{address.strip('[]')}]:{port}" if ":" in address else f"{address}:{port}"


def tf_config(hosts: Sequence[ClusterHost], index: int) -> str:
    """TF_CONFIG of worker ``index``: every host one worker, in inventory order.

    Example: ``tf_config([h1, h2], 1)`` -> ``{"cluster": {"worker": ["10.0.0.1:23456",
    "10.0.0.2:23456"]}, "task": {"type": "worker", "index": 1}}``
    """
    workers = [endpoint(h.address, h.worker_port) for h in hosts]
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
