"""All-reduce bus bandwidth across the host's GPUs through TensorFlow's collectives (NCCL).

Run: ``python -m validation.workloads.allreduce [--quick] [--json PATH]``

For each size (1 MB to 1 GB on GPUs, a few small sizes on CPU) a chain of SUM all-reduces
runs inside one tf.function under MirroredStrategy with NcclAllReduce. algbw = bytes / time
per all-reduce; busbw = algbw * 2(n-1)/n, the nccl-tests definition, so figures compare with
nccl-tests' and with the floors in thresholds.toml. Correctness: replica i contributes i+1, so
every element of the sum must equal n(n+1)/2. Without a GPU: two logical CPU devices.
The floor ``allreduce.busbw_gbps`` is gpufleet.floors.derived' for the GPU model, GPU count
and interconnect class (``nvidia-smi topo -m``, recorded in config["topology"]); the
inventory's ``allreduce_busbw_min_gbps`` overrides it, and thresholds.toml's topology layers
stand in where the matrix has none. Where nccl-tests ran on this host (``--nccl-tests``,
validation.vendor.nccl_reference) the TF figure is also held to
``allreduce.busbw_fraction_of_nccl_tests`` x its busbw. The NCCL transport in use (P2P, SHM,
NVLS, NET) is read from NCCL_DEBUG=INFO lines (validation.vendor.nccl_transport) into
config["nccl_transport"]; NVLinked GPUs talking over SHM or NET fail ``nccl_transport``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gpufleet.floors.derived import canonical_interconnect
from validation.vendor.nccl_reference import ReferenceError, busbw_at, read_reference
from validation.vendor.nccl_transport import expected_kind_missing, parse_transports
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.verdicts.thresholds import TOPOLOGY_KEY, load_thresholds_with_sources
from validation.workloads._common import Run, WorkloadError, _read_overrides, main, not_applicable
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
    """The busbw floor for this host, recorded with where it came from: the inventory's
    allreduce_busbw_min_gbps, else gpufleet.floors.derived' allreduce.busbw_gbps for (model,
    count, interconnect), else thresholds.toml's topology layers for ``ranks`` GPUs."""
    values, sources = load_thresholds_with_sources(
        run.compute_capability,
        run.gpu_model,
        _read_overrides(getattr(run.args, "thresholds", None)),
        topology=topology.name,
        gpu_count=ranks,
    )
    matrix = run.floor("allreduce.busbw_gbps")
    if sources[TOPOLOGY_KEY] != "inventory override" and matrix is not None and matrix.value:
        run.config.setdefault("threshold_sources", {})[TOPOLOGY_KEY] = matrix.origin
        return float(matrix.value)
    run.thresholds[TOPOLOGY_KEY] = values[TOPOLOGY_KEY]
    run.config.setdefault("threshold_sources", {})[TOPOLOGY_KEY] = sources[TOPOLOGY_KEY]
    return run.threshold(TOPOLOGY_KEY)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nccl-tests",
        default=None,
        metavar="JSON",
        help="this host's nccl-tests all-reduce figure (validation.vendor.nccl_reference), "
        'e.g. \'{"busbw_gbps": 231.4, "bytes": 8589934592, "gpus": 8}\' or @FILE',
    )


def nccl_debug_to(folder: Path) -> bool:
    """Have NCCL log INFO lines to files in ``folder`` (NCCL_DEBUG_FILE, %p = PID), unless the
    operator set NCCL_DEBUG already; True when this run's files are to be read."""
    if "NCCL_DEBUG" in os.environ:
        return False
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_FILE"] = str(folder / "nccl.%p.log")
    return True


def _transport_check(run: Run, folder: Path, interconnect: str) -> None:
    """Record the NCCL transports of this run and fail NVLinked GPUs that used SHM or NET."""
    text = "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("nccl.*.log")))
    transports = parse_transports(text)
    run.config["nccl_transport"] = transports
    run.metrics["nccl_transport"] = transports["summary"]
    if not transports["connections"]:
        run.add_check("nccl_transport", "evidence", not_applicable(transports["summary"]))
        return
    missing = expected_kind_missing(transports, interconnect)
    verdict = Verdict(FAIL, missing) if missing else Verdict(PASS, transports["summary"])
    run.add_check("nccl_transport", "evidence", verdict)


def _against_nccl_tests(run: Run, busbw: list[float], size: int, ranks: int) -> None:
    """TF's busbw as a fraction of nccl-tests' on the same host (issue 13 item 4)."""
    try:
        reference = read_reference(getattr(run.args, "nccl_tests", None))
    except ReferenceError as exc:
        raise WorkloadError(str(exc)) from None
    floor = run.floor("allreduce.busbw_fraction_of_nccl_tests")
    run.config["nccl_tests_reference"] = reference
    skip = run.speed_not_applicable
    if skip is None and reference is None:
        skip = "no nccl-tests figure for this host (the full tier runs all_reduce_perf first)"
    if skip is None and reference is not None and reference["gpus"] != ranks:
        skip = f"nccl-tests ran on {reference['gpus']} GPUs, TensorFlow uses {ranks}"
    if skip is None and (floor is None or floor.value is None):
        skip = f"no floor allreduce.busbw_fraction_of_nccl_tests ({run.floors_reason})"
    same = busbw_at(reference, size) if reference is not None else None
    if skip is None and reference is not None and same is None:
        skip = (
            f"nccl-tests has no row at {size} B (its rows: {sorted(map(int, reference['sizes']))})"
        )
    if reference is not None:
        run.config["nccl_tests_at_size"] = {"bytes": size, "busbw_gbps": same}
    fractions = [b / same for b in busbw] if same else list(busbw)
    run.sample_check(
        "busbw_vs_nccl_tests",
        "busbw_fraction_of_nccl_tests" if same else None,
        fractions,
        threshold=float(floor.value) if floor is not None and floor.value else 1.0,
        what=f"TF busbw at {size} B / nccl-tests busbw at {size} B",
        not_applicable=skip,
    )


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
    # mkdtemp: a folder only this user can read, made for this run and removed at its end.
    logs = Path(tempfile.mkdtemp(prefix="gpufleet-nccl-"))
    read_logs = run.has_gpu and nccl_debug_to(logs)
    try:
        _measure_and_judge(run, strategy, cfg, topology, ranks, logs if read_logs else None)
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _measure_and_judge(
    run: Run,
    strategy: Any,
    cfg: dict[str, Any],
    topology: GpuTopology,
    ranks: int,
    logs: Path | None,
) -> None:
    tf = run.tf
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
            "size",
            f"{size} B: busbw median {float(np.median(busbw)):.2f} GB/s",
            ",".join(run.compute_devices),
        )
        del tensor
    run.measurements["sizes"] = table
    largest = table[-1]
    run.metrics["busbw_gbps_largest"] = float(np.median(largest["busbw_gbps"]))
    if logs is not None:
        _transport_check(run, logs, canonical_interconnect(topology.name, ranks))
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
        "busbw_gbps",
        list(largest["busbw_gbps"]),
        threshold=floor,
        what=f"busbw GB/s at {largest['bytes']} B",
        not_applicable=skip,
    )
    if "busbw_gbps" not in run.metrics:  # the figure is reported even when not judged
        run.metrics["busbw_gbps"] = run.metrics["busbw_gbps_largest"]
    _against_nccl_tests(run, list(largest["busbw_gbps"]), largest["bytes"], ranks)


if __name__ == "__main__":
    raise SystemExit(
        main(
            "allreduce",
            body,
            description=__doc__.splitlines()[0],
            logical_cpus=2,
            add_arguments=_arguments,
        )
    )
