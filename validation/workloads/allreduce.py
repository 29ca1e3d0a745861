"""All-reduce bus bandwidth across the host's GPUs through TensorFlow's collectives (NCCL).

Run: ``python -m validation.workloads.allreduce [--quick] [--json PATH]``

For each size (1 MB to 1 GB on GPUs, a few small sizes on CPU) a chain of SUM all-reduces
runs inside one tf.function under MirroredStrategy with NcclAllReduce. algbw = bytes / time
per all-reduce; busbw = algbw * 2(n-1)/n, the nccl-tests definition, so figures compare with
nccl-tests' and with the floors in thresholds.toml. Correctness: replica i contributes i+1, so
every element of the sum must equal n(n+1)/2. Without a GPU: two logical CPU devices.
The floor follows the GPU interconnect class read from ``nvidia-smi topo -m`` (recorded in
config["topology"]) unless thresholds.toml has one for the GPU model or the inventory sets one.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from validation.harness import FAIL, PASS, Verdict
from validation.thresholds import TOPOLOGY_KEY, load_thresholds_with_sources
from validation.workloads._common import Run, _read_overrides, main
from validation.workloads._topology import GpuTopology, host_topology

MIB = 2**20
QUICK_CPU: dict[str, Any] = {"sizes_bytes": [4096, 65536, MIB], "chain": 5, "repetitions": 3}
QUICK_GPU: dict[str, Any] = {
    "sizes_bytes": [MIB * 4**k for k in range(6)],
    "chain": 10,
    "repetitions": 8,
}
FULL_GPU: dict[str, Any] = {
    "sizes_bytes": [MIB * 2**k for k in range(11)],
    "chain": 20,
    "repetitions": 12,
}


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw * 2(n-1)/n.

    Example:
        >>> bus_bandwidth(100.0, 8)
        175.0
    """
    return algbw * 2 * (ranks - 1) / ranks


def choose_floor(run: Run, topology: GpuTopology, ranks: int) -> float:
    """The busbw floor for this host: thresholds.toml's layers with the topology class, for
    ``ranks`` GPUs; records the floor and the layer it came from in the document's config."""
    values, sources = load_thresholds_with_sources(
        run.compute_capability,
        run.gpu_model,
        _read_overrides(getattr(run.args, "thresholds", None)),
        topology=topology.name,
        gpu_count=ranks,
    )
    run.thresholds[TOPOLOGY_KEY] = values[TOPOLOGY_KEY]
    run.config.setdefault("threshold_sources", {})[TOPOLOGY_KEY] = sources[TOPOLOGY_KEY]
    return run.threshold(TOPOLOGY_KEY)


def _chained_allreduce(tf: Any, strategy: Any, chain: int) -> Any:
    """``chain`` dependent SUM all-reduces per call (zeros stay zeros: no overflow)."""

    def replica(t: Any) -> Any:
        context = tf.distribute.get_replica_context()
        for _ in range(chain):
            t = context.all_reduce("SUM", t)
        return t[0]

    @tf.function
    def run(t: Any) -> Any:
        return strategy.experimental_local_results(strategy.run(replica, args=(t,)))

    return run


def _single_allreduce(tf: Any, strategy: Any) -> Any:
    @tf.function
    def run(t: Any) -> Any:
        reduced = strategy.run(
            lambda v: tf.distribute.get_replica_context().all_reduce("SUM", v), args=(t,)
        )
        return strategy.experimental_local_results(reduced)

    return run


def body(run: Run) -> None:
    tf = run.tf
    devices = run.compute_devices
    ranks = len(devices)
    cfg = run.sizes(QUICK_CPU, QUICK_GPU, FULL_GPU)
    cross_device = tf.distribute.NcclAllReduce() if run.has_gpu else None
    strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=cross_device)
    run.config.update(
        devices=devices,
        ranks=ranks,
        dtype="float32",
        cross_device_ops="NcclAllReduce" if run.has_gpu else "default (CPU)",
    )
    topology = host_topology(run.has_gpu)
    run.config["topology"] = topology.to_dict()
    if run.has_gpu and topology.gpus not in (0, ranks):
        # CUDA_VISIBLE_DEVICES hides some GPUs: the class is the whole host's, the floor's GPU
        # count is what TensorFlow uses.
        run.config["topology"]["note"] = f"nvidia-smi lists {topology.gpus} GPUs, TF uses {ranks}"
    run.step("topology", f"{topology.name}: {topology.reason}")

    def per_replica(elements: int, fill: str) -> Any:
        def value(context: Any) -> Any:
            if fill == "zeros":
                return tf.zeros([elements], tf.float32)
            return tf.fill([elements], tf.cast(context.replica_id_in_sync_group + 1, tf.float32))

        return strategy.experimental_distribute_values_from_function(value)

    # Correctness on a mid-sized tensor: every replica must hold n(n+1)/2 everywhere.
    elements = cfg["sizes_bytes"][0] // 4
    results = [r.numpy() for r in _single_allreduce(tf, strategy)(per_replica(elements, "ids"))]
    expected = ranks * (ranks + 1) / 2
    wrong = sum(int(np.count_nonzero(r != expected)) for r in results)
    run.add_check(
        "sum_correct",
        "correctness",
        Verdict(
            PASS if wrong == 0 and len(results) == ranks else FAIL,
            f"SUM over {ranks} replicas of {elements} floats: {wrong} element(s) differ from "
            f"{expected:g} on {len(results)} replica(s)",
        ),
    )

    step = _chained_allreduce(tf, strategy, cfg["chain"])
    table = []
    for size in cfg["sizes_bytes"]:
        tensor = per_replica(size // 4, "zeros")
        [r.numpy() for r in step(tensor)]  # warm-up: tracing and NCCL communicator setup
        busbw = []
        seconds_each = []
        for _ in range(cfg["repetitions"]):
            with run.phase(f"{size}B"):
                start = time.perf_counter()
                [r.numpy() for r in step(tensor)]
                seconds = (time.perf_counter() - start) / cfg["chain"]
            seconds_each.append(seconds)
            busbw.append(bus_bandwidth(size / seconds / 1e9, ranks))
        table.append(
            {
                "bytes": size,
                "seconds": seconds_each,
                "algbw_gbps": [size / s / 1e9 for s in seconds_each],
                "busbw_gbps": busbw,
            }
        )
        run.step(
            "size", f"{size} B: busbw median {float(np.median(busbw)):.2f} GB/s", ",".join(devices)
        )
        del tensor
    run.measurements["sizes"] = table
    largest = table[-1]
    run.metrics["busbw_gbps_largest"] = float(np.median(largest["busbw_gbps"]))
    run.metrics["busbw_gbps_by_size"] = {
        str(row["bytes"]): float(np.median(row["busbw_gbps"])) for row in table
    }
    floor = choose_floor(run, topology, ranks)
    skip = run.speed_not_applicable
    if skip is None and ranks < 2:
        skip = f"all-reduce needs at least 2 GPUs; this host has {ranks}"
    if skip is None and floor <= 0:
        skip = (
            f"no all-reduce floor for {ranks}x {run.gpu_model} on topology {topology.name!r}: "
            "set allreduce_busbw_min_gbps in the inventory's thresholds"
        )
    run.sample_check(
        "busbw_floor",
        "busbw_gbps_largest",
        list(largest["busbw_gbps"]),
        threshold=floor,
        what=f"busbw GB/s at {largest['bytes']} B",
        not_applicable=skip,
    )


if __name__ == "__main__":
    raise SystemExit(main("allreduce", body, description=__doc__.splitlines()[0], logical_cpus=2))
