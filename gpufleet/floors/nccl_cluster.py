"""The cluster tier's all_reduce_perf floors across hosts: the declared fabric, published runs."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.floors.nccl import FLOORS, GIB, model_key

# The floor every cross-host run gets: its max busbw (GB/s) against the fabric one host declares
# (``nccl_fabric_gbps``, else ``interconnect_gbps``, Gbit/s; the lowest host's), in bytes/s.
# Why a fraction of the link: in a ring all-reduce across nodes every byte of the busbw crosses
# each node's NICs once, so a ring's busbw tops out at the node's NIC bandwidth (NCCL's tree and
# NVLS algorithms can beat it on 2 nodes). NVIDIA's maintainer puts the healthy figure at 0.96 x
# the line rate ("24GB/s is the peak performance per 200G NIC (12 GB/s for 100G NICs)",
# https://github.com/NVIDIA/nccl-tests/issues/119). gpufleet passes 0.6 x: the lowest healthy
# published run it knows, 2x p4d over EFA with NCCL 2.8.3 (aws-samples/aws-efa-eks README), made
# 0.66 x its 400 Gbit/s; a NIC at half its rate or worse, or traffic on TCP sockets over a
# fabric declared for RDMA, falls below it. No anchor publishes a 2-node InfiniBand floor
# (Azure checks IB one VM at a time; AWS and Google floors are EFA, TCPX and RoCE machine types),
# so on IB this fabric floor is the only enforced one.
FABRIC_FRACTION = 0.6
NVIDIA_TARGET_FRACTION = 0.96
# Published healthy runs are floors at this fraction of their figure: gpufleet's margin for a
# run-to-run spread it has not measured; the fabric floor stays the lower bound.
PUBLISHED_MARGIN = 0.8
NETWORKS = ("ib", "efa", "socket", "unknown")
# The anchors' multi-node classes (gpufleet.floors.nccl) a transport can stand for. NET/IB
# is InfiniBand and RoCE alike (NCCL's verbs transport), so Google's RoCE floors apply to it as
# advisory only: NCCL cannot tell an a3-ultra from another RoCE or IB fabric.
ANCHOR_CLASSES = {"efa": "nvlink+efa", "ib": "nvlink+roce"}

_AWS_README = (
    "aws-samples/awsome-distributed-training@0162aacd5da07d424e13f44bef8dd2c4cfcc66e4 "
    "micro-benchmarks/nccl-tests/README.md"
)


@dataclass(frozen=True)
class PublishedRun:
    """A healthy cross-host all_reduce_perf run someone published, with what it ran on."""

    gpu_model: str
    gpus_per_host: int
    hosts: int
    network: str
    busbw_gbps: float  # the best busbw of the run's table
    size: int  # bytes, where it was measured
    platform: str
    source: str


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("H100 80GB HBM3", 8, 2, "efa", 487.26, 16 * GIB, "2x p5.48xlarge",
                 f"{_AWS_README} (the 2x p5.48xlarge table, in-place at 16G)"),
    PublishedRun("A100-SXM4-80GB", 8, 2, "efa", 78.33, 2 * GIB, "2x p4de.24xlarge",
                 f"{_AWS_README} (the 2x p4de.24xlarge table, at 2G)"),
)  # fmt: skip


@dataclass(frozen=True)
class ClusterFloor:
    """One floor for a cross-host run's max busbw (GB/s); ``enforced`` False: advisory only."""

    name: str
    busbw_gbps: float
    enforced: bool
    source: str

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "busbw_gbps": round(self.busbw_gbps, 2),
            "enforced": self.enforced,
            "source": self.source,
        }


def fabric_floor(fabric_gbps: int) -> ClusterFloor:
    """FABRIC_FRACTION x the declared fabric in GB/s.

    >>> fabric_floor(400).busbw_gbps  # 4x 100G: 50 GB/s of line rate
    30.0
    """
    if fabric_gbps <= 0:
        raise ValueError(f"fabric of {fabric_gbps} Gbit/s declares no link")
    return ClusterFloor(
        "fabric",
        FABRIC_FRACTION * fabric_gbps / 8,
        True,
        f"gpufleet: {FABRIC_FRACTION} x the declared {fabric_gbps} Gbit/s per host; NVIDIA's "
        f"healthy figure is {NVIDIA_TARGET_FRACTION} x (https://github.com/NVIDIA/nccl-tests/"
        "issues/119); no anchor publishes a 2-node InfiniBand floor",
    )


def cluster_floors(
    gpu_model: str, gpus_per_host: int, hosts: int, network: str, fabric_gbps: int
) -> list[ClusterFloor]:
    """The floors of one cross-host run, the enforced ones first.

    >>> [f.name for f in cluster_floors("NVIDIA H100 80GB HBM3", 8, 2, "efa", 3200)]
    ['fabric', 'published: 2x p5.48xlarge', 'anchor: nvlink+efa']
    >>> [f.name for f in cluster_floors("NVIDIA H100 80GB HBM3", 8, 2, "ib", 3200)]
    ['fabric']
    """
    if network not in NETWORKS:
        raise ValueError(f"network {network!r} is not one of {', '.join(NETWORKS)}")
    floors = [fabric_floor(fabric_gbps)]
    key = model_key(gpu_model)
    for run in PUBLISHED_RUNS:
        if (model_key(run.gpu_model), run.gpus_per_host, run.hosts, run.network) == (
            key,
            gpus_per_host,
            hosts,
            network,
        ):
            floors.append(
                ClusterFloor(
                    f"published: {run.platform}",
                    PUBLISHED_MARGIN * run.busbw_gbps,
                    True,
                    f"{PUBLISHED_MARGIN} x {run.busbw_gbps} GB/s measured, {run.source}",
                )
            )
    anchor_class = ANCHOR_CLASSES.get(network)
    for floor in FLOORS if hosts == 2 else ():  # the anchors measure 2 hosts
        if (model_key(floor.gpu_model), floor.gpu_count, floor.interconnect) == (
            key,
            gpus_per_host * hosts,
            anchor_class,
        ):
            floors.append(
                ClusterFloor(f"anchor: {floor.interconnect}", floor.busbw_gbps, False, floor.source)
            )
    return floors


def judge_busbw(max_busbw: float, floors: list[ClusterFloor]) -> tuple[bool, str, list[str]]:
    """(passed, reason, advisory shortfalls): every enforced floor must be met.

    >>> judge_busbw(20.0, [fabric_floor(400)])[:2]
    (False, 'max busbw 20 GB/s < 30 GB/s (fabric)')
    """
    missed = [f for f in floors if f.enforced and max_busbw < f.busbw_gbps]
    advisory = [
        f"max busbw {max_busbw:g} GB/s < advisory {f.busbw_gbps:g} GB/s ({f.name}: {f.source})"
        for f in floors
        if not f.enforced and max_busbw < f.busbw_gbps
    ]
    if missed:
        worst = max(missed, key=lambda f: f.busbw_gbps)
        return (
            False,
            f"max busbw {max_busbw:g} GB/s < {worst.busbw_gbps:g} GB/s ({worst.name})",
            advisory,
        )
    enforced = [f for f in floors if f.enforced]
    top = max(enforced, key=lambda f: f.busbw_gbps)
    return True, f"max busbw {max_busbw:g} GB/s >= {top.busbw_gbps:g} GB/s ({top.name})", advisory
