"""nccl-tests all_reduce_perf bus-bandwidth floors by GPU model, GPU count and interconnect."""

from __future__ import annotations

from dataclasses import dataclass

# Every floor names where its figure comes from. The sources measure differently, so each
# floor also says which nccl-tests figure it is compared with (``metric``) and at which
# message size the source measured (``measured_at``):
#
# - Azure (azurehpc-health-checks ``conf/<sku>.conf``): ``check_nccl_allreduce <GB/s> <repeats>
#   <topo> <size>`` runs ``all_reduce_perf -b <size> -e <size>`` on one VM and compares the
#   "Avg bus bandwidth" of that single size (``customTests/azure_nccl_allreduce.nhc``), so the
#   comparable gpufleet figure is the busbw at the largest size of a sweep.
# - AWS (awsome-distributed-training ``checks/5-nccl-allreduce.sh``): the maximum busbw of
#   ``all_reduce_perf -b 8 -e 128M -f 2 -g 8`` over >= 2 nodes. AWS reports a figure below its
#   floor as a warning only ("advisory (MONITOR)"), and its own README sample (2x p5, 487 GB/s)
#   is below its p5 floor, so gpufleet keeps these floors advisory: below them is "warn".
# - Google (cluster-health-scanner ``deploy/helm/health_checks/nccl_healthcheck/<machine>.yaml``):
#   2 hosts x 8 GPUs, sizes 2G..8G, the average busbw against ``BANDWIDTH_THRESHOLD``; busbw grows
#   with the message size, so gpufleet compares its busbw at the largest size (>= 2G).

GIB = 1 << 30

# Intra-node classes are validation/workloads/_topology.py's (the slowest GPU pair in
# `nvidia-smi topo -m`); multi-node classes add the network between the nodes.
SINGLE_NODE_CLASSES = (
    "nvlink",
    "nvlink_partial",
    "pcie_switch",
    "pcie_host_bridge",
    "cross_socket",
)
MULTI_NODE_CLASSES = ("nvlink+ib", "nvlink+roce", "nvlink+efa", "nvlink+tcpx", "nvlink+tcpxo")
INTERCONNECT_CLASSES = SINGLE_NODE_CLASSES + MULTI_NODE_CLASSES
METRICS = ("largest", "max")


@dataclass(frozen=True)
class NcclFloor:
    """The lowest healthy all-reduce busbw (GB/s) for one (GPU model, GPU count, interconnect).

    ``gpu_model`` is the name as NVML/nvidia-smi prints it, without the "NVIDIA " prefix;
    ``metric`` "largest" compares the busbw at the run's largest message size, "max" the best
    busbw of any size; ``enforced`` False makes a figure below the floor a warning.
    """

    gpu_model: str
    gpu_count: int
    interconnect: str
    busbw_gbps: float
    metric: str
    measured_at: int  # message size (bytes) at or up to which the source measured
    source: str
    enforced: bool = True
    note: str = ""


_AZURE = "Azure/azurehpc-health-checks"
_AWS = "aws-samples/awsome-distributed-training"
_AWS_CHECK = "4.validation_and_observability/2.gpu-cluster-healthcheck/checks/5-nccl-allreduce.sh"
_AWS_AT = f"{_AWS}@15c6605adf1ff008640de963d0dc0adb2a3f929d {_AWS_CHECK}"
_CHS = "GoogleCloudPlatform/cluster-health-scanner"
_CHS_DIR = "deploy/helm/health_checks/nccl_healthcheck"

# Single-node floors (review 2, N8): 0.9 x a healthy host's measured figure, not a cloud's
# acceptance threshold (Azure's 228 / 460 / 431 sit at the healthy level: a healthy HGX A100
# shows about 200, an H100 without NVLink SHARP about 370).
HEALTHY_FRACTION = 0.9
_NCCL149 = "NVIDIA/nccl-tests#149 (a healthy HPE 8x A100 80GB shows about 200 GB/s at large sizes)"
_NCCL212 = (
    "NVIDIA/nccl-tests#212 (8x H100: ring about 370 GB/s at large sizes, NVLink SHARP about 480)"
)
_RING = "ring, the lower of the healthy algorithms: a host whose NCCL picks no NVLS still passes"

FLOORS: tuple[NcclFloor, ...] = (
    NcclFloor(
        "A100-SXM4-40GB", 8, "nvlink", HEALTHY_FRACTION * 200.0, "largest", 8 * GIB,
        f"0.9 x {_NCCL149}", note="proxy: the 40GB SXM4 has the 80GB part's NVLink 3 fabric; "
        "Azure's ND96asr_v4 acceptance threshold is 228.0 at 8G",
    ),
    NcclFloor(
        "A100-SXM4-80GB", 8, "nvlink", HEALTHY_FRACTION * 200.0, "largest", 8 * GIB,
        f"0.9 x {_NCCL149}", note="Azure's ND96amsr_A100_v4 acceptance threshold is 228.0 at 4G",
    ),
    NcclFloor(
        "H100 80GB HBM3", 8, "nvlink", HEALTHY_FRACTION * 370.0, "largest", 16 * GIB,
        f"0.9 x {_NCCL212}", note=f"{_RING}; Azure's ND96isr_H100_v5 threshold is 460.0 at 16G",
    ),
    NcclFloor(
        "H200", 8, "nvlink", HEALTHY_FRACTION * 370.0, "largest", 16 * GIB,
        f"0.9 x {_NCCL212}", note=f"proxy: H200 has the H100's NVLink 4 fabric; {_RING}; "
        "Azure's ND96isr_H200_v5 threshold is 431.0 at 16G",
    ),
    NcclFloor(
        "A100-SXM4-40GB", 16, "nvlink+efa", 300.0, "max", 128 << 20,
        f"{_AWS_AT} (p4d.24xlarge)", enforced=False,
        note="AWS treats a figure below it as advisory; 2x p4d over EFA measured 32.8 GB/s "
        "max (aws-samples/aws-efa-eks README)",
    ),
    NcclFloor(
        "H100 80GB HBM3", 16, "nvlink+efa", 800.0, "max", 128 << 20,
        f"{_AWS_AT} (p5.48xlarge)", enforced=False,
        note="AWS's own 2x p5 sample reached 487 GB/s, below this floor",
    ),
    NcclFloor("H200", 16, "nvlink+efa", 800.0, "max", 128 << 20,
              f"{_AWS_AT} (p5e/p5en.48xlarge)", enforced=False),
    NcclFloor("B200", 16, "nvlink+efa", 900.0, "max", 128 << 20,
              f"{_AWS_AT} (p6-b200.48xlarge)", enforced=False),
    NcclFloor(
        "H100 80GB HBM3", 16, "nvlink+tcpx", 60.0, "largest", 8 * GIB,
        f"{_CHS}@20b8492cdb0849e0f7d49e8ccad810dc601e1304 {_CHS_DIR}/a3.yaml "
        "(a3-highgpu-8g, GPUDirect-TCPX: BANDWIDTH_THRESHOLD 60)",
    ),
    NcclFloor(
        "H100 80GB HBM3", 16, "nvlink+tcpxo", 90.0, "largest", 8 * GIB,
        f"{_CHS}@24863a8da11ad2a557818e63392db6ae4d1d5f45 {_CHS_DIR}/a3plus.yaml "
        "(a3-megagpu-8g, GPUDirect-TCPXO: BANDWIDTH_THRESHOLD 90)",
    ),
    NcclFloor(
        "H200", 16, "nvlink+roce", 250.0, "largest", 8 * GIB,
        f"{_CHS}@52a913a41a21180a9d38d62423c82c3bef87a19c {_CHS_DIR}/a3ultra.yaml "
        "(a3-ultragpu-8g, RoCE: BANDWIDTH_THRESHOLD 250)",
    ),
    NcclFloor(
        "B200", 16, "nvlink+roce", 250.0, "largest", 8 * GIB,
        f"{_CHS}@28f25fcb219bf530dcad3889c51ae8597e75de47 {_CHS_DIR}/a4.yaml "
        "(a4-highgpu-8g, RoCE: BANDWIDTH_THRESHOLD 250)",
    ),
)  # fmt: skip


def interconnect_class(topology_class: str, network: str | None = None) -> str:
    """The floors' interconnect class: the intra-node topology class for a one-node run, or
    "nvlink+<network>" for a multi-node run (network: ib, roce, efa, tcpx, tcpxo).

    >>> interconnect_class("nvlink"), interconnect_class("nvlink", "efa")
    ('nvlink', 'nvlink+efa')
    >>> interconnect_class("pcie_switch", "ib")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: no multi-node floors over 'pcie_switch' GPUs; the classes are nvlink+ib, ...
    """
    if network is None:
        name = topology_class
    else:
        name = f"{topology_class}+{network}"
        if name not in MULTI_NODE_CLASSES:
            raise ValueError(
                f"no multi-node floors over {topology_class!r} GPUs; the classes are "
                + ", ".join(MULTI_NODE_CLASSES)
            )
    if name not in INTERCONNECT_CLASSES:
        raise ValueError(
            f"unknown interconnect class {name!r}; known: {', '.join(INTERCONNECT_CLASSES)}"
        )
    return name


def model_key(name: str) -> str:
    """A GPU name as NVML or nccl-tests print it -> the floors' key.

    >>> model_key("NVIDIA H100 80GB HBM3"), model_key(" A100-SXM4-40GB ")
    ('h100 80gb hbm3', 'a100-sxm4-40gb')
    """
    words = name.split()
    if words and words[0].upper() == "NVIDIA":
        words = words[1:]
    return " ".join(words).lower()


def find_floor(
    gpu_model: str, gpu_count: int, interconnect: str, floors: tuple[NcclFloor, ...] = FLOORS
) -> NcclFloor | None:
    """The floor for this GPU model, GPU count and interconnect class, or None.

    >>> find_floor("NVIDIA A100-SXM4-40GB", 8, "nvlink").busbw_gbps
    180.0
    >>> find_floor("NVIDIA A100-SXM4-40GB", 4, "nvlink") is None
    True
    """
    key = model_key(gpu_model)
    for floor in floors:
        if (model_key(floor.gpu_model), floor.gpu_count, floor.interconnect) == (
            key,
            gpu_count,
            interconnect,
        ):
            return floor
    return None
