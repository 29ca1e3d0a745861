"""The cluster tier's NCCL part: all_reduce_perf across the group's GPUs, judged, its culprit.

One run over every GPU of the group (``gpufleet.cluster.nccl_launch``: mpirun over SSH, or srun
on a Slurm partition), its table read by ``gpufleet.parsers.nccl``, NCCL's transport by
``validation.vendor.nccl_transport``, its max busbw judged by ``gpufleet.floors.nccl_cluster``.
A failing group is re-run by pairs (``gpufleet.cluster.culprit``) to name the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.cluster import culprit
from gpufleet.cluster.config import ClusterError, ClusterHost
from gpufleet.cluster.launcher import Launcher
from gpufleet.cluster.nccl_launch import mpirun_argv, nccl_env, srun_nccl_argv
from gpufleet.floors.nccl_cluster import cluster_floors, judge_busbw
from gpufleet.parsers.nccl import NcclTestsParseError, parse_nccl_tests, rank_hosts
from validation.vendor.nccl_transport import parse_transports

LABEL = "nccl-tests"
RUN_TIMEOUT_S = 1200  # as the full tier's single-host run (validation.vendor.runs)
SKIP_NO_MPI = (
    "nccl_tests_mpi is off on {hosts}: the deploy builds all_reduce_perf with MPI (for runs "
    "across hosts) only where the inventory asks. Fix: nccl_tests_mpi: true, then deploy"
)
# The network NCCL used between hosts, from its channel lines (``via NET/<name>/...``): IB verbs
# (InfiniBand and RoCE), aws-ofi-nccl on EFA ("Libfabric"; NCCL 2.8-era logs name it "AWS
# Libfabric", which the channel pattern reads as "NET/AWS"), or TCP sockets.
NETWORK_OF = {"NET/IB": "ib", "NET/Libfabric": "efa", "NET/AWS": "efa", "NET/Socket": "socket"}


@dataclass
class RunOutcome:
    """What one all_reduce_perf run gave: its exit status (None: timed out) and its output."""

    status: int | None
    text: str


def network_of(transports: dict[str, Any]) -> str:
    """``ib``, ``efa`` or ``socket`` (the slowest seen between hosts), else ``unknown``.

    >>> network_of({"connections": {"NET/IB": 8, "P2P/IPC": 16}})
    'ib'
    """
    seen = {NETWORK_OF[name] for name in transports.get("connections", {}) if name in NETWORK_OF}
    for network in ("socket", "efa", "ib"):  # a rank on sockets holds back the whole ring
        if network in seen:
            return network
    return "unknown"


def gpus_per_host(launcher: Launcher, hosts: Sequence[ClusterHost]) -> int:
    """The GPUs every host has (the inventory's gpu_count, else nvidia-smi's list); one figure
    for the group, as mpirun's slots and srun's tasks per node are."""
    counts = {}
    for host in hosts:
        if host.gpu_count:
            counts[host.name] = host.gpu_count
            continue
        status, out, err = launcher.run(host, "nvidia-smi --query-gpu=name --format=csv,noheader")
        if status != 0:
            raise ClusterError(f"host {host.name}: nvidia-smi failed: {err.strip()[:200]}")
        counts[host.name] = len([line for line in out.splitlines() if line.strip()])
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise ClusterError(
            "all_reduce_perf across hosts needs the same number of GPUs on every host; found "
            + ", ".join(f"{name}: {n}" for name, n in counts.items())
        )
    return next(iter(counts.values()))


def launch_argv(hosts: Sequence[ClusterHost], run_id: str, gpus: int) -> list[str]:
    """srun when the group is a Slurm partition, else mpirun from the first host."""
    if any(h.slurm for h in hosts):
        return srun_nccl_argv(hosts, run_id, gpus)
    return mpirun_argv(hosts, gpus)


def run_once(launcher: Launcher, hosts: Sequence[ClusterHost], gpus: int) -> RunOutcome:
    """One all_reduce_perf over ``hosts``, started on the first one (tracked for the clean-up)."""
    argv = launch_argv(hosts, launcher.run_id, gpus)
    remote = launcher.start(hosts[0], LABEL, argv, nccl_env(hosts))
    status, out, err = remote.wait(RUN_TIMEOUT_S)
    if status is None:
        launcher.stop(hosts[0], LABEL)
    return RunOutcome(status, f"{out}\n{err}")


def _fail(reason: str, **figures: Any) -> dict[str, Any]:
    return {"status": "fail", "reason": reason, "figures": figures}


def judge(outcome: RunOutcome, hosts: Sequence[ClusterHost], gpus: int) -> dict[str, Any]:
    """pass/fail of one run on ``hosts`` x ``gpus``, with its figures (pure: text in)."""
    tail = " | ".join(outcome.text.strip().splitlines()[-3:])[:400]
    if outcome.status is None:
        return _fail(f"all_reduce_perf did not finish within {RUN_TIMEOUT_S} s")
    if outcome.status != 0:
        return _fail(f"all_reduce_perf exited {outcome.status}: {tail}")
    ranks = rank_hosts(outcome.text)
    numbers = [rank for rank, _host in ranks]
    if len(set(numbers)) != len(numbers):
        return _fail(
            "rank numbers repeat: each process ran alone, so the binary is not an MPI build "
            "(nccl-tests needs make MPI=1)",
            ranks=len(ranks),
        )
    on = sorted({host for _rank, host in ranks})
    if len(ranks) != gpus * len(hosts) or len(on) != len(hosts):
        return _fail(
            f"{len(ranks)} rank(s) on {len(on)} host(s) ({', '.join(on)}); expected "
            f"{gpus} on each of {len(hosts)}",
            ranks=len(ranks),
        )
    try:
        result = parse_nccl_tests(outcome.text)
    except NcclTestsParseError as exc:
        return _fail(str(exc))
    transports = parse_transports(outcome.text)
    network = network_of(transports)
    figures: dict[str, Any] = {
        "max_busbw_gbps": result.max_busbw,
        "largest_busbw_gbps": result.largest_busbw,
        "largest_size": None if result.largest is None else result.largest.size,
        "avg_busbw_gbps": result.avg_busbw,
        "wrong": result.wrong,
        "ranks": len(ranks),
        "gpus_per_host": gpus,
        "gpu_model": result.devices[0] if result.devices else None,
        "network": network,
        "transport": transports["summary"],
    }
    if result.wrong:
        return _fail(f"{result.wrong} wrong result(s) (#wrong)", **figures)
    expected = {h.nccl_transport for h in hosts} - {"auto"}
    if expected and network not in expected:
        return _fail(
            f"NCCL used {network} between the hosts ({transports['summary']}); the inventory "
            f"expects {', '.join(sorted(expected))} (nccl_transport)",
            **figures,
        )
    if result.max_busbw is None:
        return _fail("no busbw figure in the table", **figures)
    fabric = min(h.fabric_gbps for h in hosts)
    floors = cluster_floors(figures["gpu_model"] or "", gpus, len(hosts), network, fabric)
    passed, reason, advisory = judge_busbw(result.max_busbw, floors)
    figures.update(floors=[f.to_dict() for f in floors], advisory=advisory, fabric_gbps=fabric)
    return {"status": "pass" if passed else "fail", "reason": reason, "figures": figures}


def section(
    launcher: Launcher, hosts: Sequence[ClusterHost]
) -> tuple[dict[str, Any], list[str], str]:
    """The results' ``nccl_tests`` section, the hosts named after a failure, and how."""
    if any(h.gpu_less for h in hosts):
        return {"status": "skipped", "reason": "no GPU"}, [], ""
    missing = [h.name for h in hosts if h.nccl_mpi_bin is None]
    if missing:
        return {"status": "skipped", "reason": SKIP_NO_MPI.format(hosts=", ".join(missing))}, [], ""
    try:
        gpus = gpus_per_host(launcher, hosts)
        argv = launch_argv(hosts, launcher.run_id, gpus)
    except ClusterError as exc:
        return {"status": "error", "reason": str(exc)}, [], ""
    verdict = judge(run_once(launcher, hosts, gpus), hosts, gpus)
    doc = {
        "status": verdict["status"],
        "reason": verdict["reason"],
        "launcher": "srun" if argv[0] == "srun" else "mpirun",
        "command": argv,
        "figures": verdict["figures"],
        "pairs": [],
    }
    if verdict["status"] != "fail":
        return doc, [], ""
    if len(hosts) == 2:  # the group is the only pair: nothing to compare it with
        return doc, [], "two hosts: no third to pair each with, so neither is isolated"

    def probe(a: ClusterHost, b: ClusterHost) -> bool:
        pair = judge(run_once(launcher, [a, b], gpus), [a, b], gpus)
        doc["pairs"].append({"hosts": [a.name, b.name], "status": pair["status"],
                             "reason": pair["reason"]})  # fmt: skip
        return bool(pair["status"] == "pass")

    named, how = culprit.find_culprits(list(hosts), probe)
    return doc, [h.name for h in named], how
