"""The cluster tier's NCCL part: command lines, the judge on recorded outputs, floors, culprit.

Outputs are recorded real ones (tests/fixtures/nccl_tests and nccl_debug, sources in their
SOURCES.md). Degraded figures in the floor table are derived from the healthy published ones,
each row saying how; no GPU runs here.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.cluster import nccl
from gpufleet.cluster.config import ClusterError, ClusterHost
from gpufleet.cluster.launcher import background_script
from gpufleet.cluster.nccl_launch import mpirun_argv, nccl_env, srun_nccl_argv
from gpufleet.cluster.output import nccl_check, prometheus_text
from gpufleet.floors.nccl_cluster import cluster_floors, judge_busbw
from gpufleet.parsers import parse_nccl_tests
from gpufleet.parsers.nccl import rank_hosts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BIN = "/opt/gpufleet/nccl-tests/38974e703421-mpi/bin"


def host(name: str, **kw: object) -> ClusterHost:
    base = ClusterHost(
        name=name,
        alias=f"a-{name}",
        address=f"10.0.0.{len(name)}",
        python="/opt/env/bin/python",
        payload_dir="/opt/gpufleet/validation/current",
        interconnect_gbps=100,
        gpu_less=False,
        sudo=False,
        textfile_dir=None,
        nccl_mpi_bin=BIN,
        fabric_gbps=400,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def text(name: str) -> str:
    return (FIXTURES / "nccl_tests" / name).read_text()


def test_mpirun_line_one_rank_per_gpu_over_ssh_from_the_first_host():
    hosts = [host("gpu-a", address="10.0.0.1"), host("gpu-b", address="10.0.0.2")]
    hosts = [replace(h, nccl_socket_ifname="=ens5", nccl_ib_hca="mlx5") for h in hosts]
    assert mpirun_argv(hosts, 8) == [
        "/usr/bin/mpirun.openmpi", "--tag-output", "--bind-to", "none",
        "--mca", "plm_rsh_agent", "ssh", "--mca", "plm_rsh_args", "-o BatchMode=yes",
        "-np", "16", "-H", "10.0.0.1:8,10.0.0.2:8",
        "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_SOCKET_IFNAME==ens5", "-x", "NCCL_IB_HCA=mlx5",
        f"{BIN}/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1",
    ]  # fmt: skip
    # every element reaches the remote shell quoted: the rsh options stay one argument
    line = background_script("/tmp/gpufleet-cluster-x", "nccl-tests", mpirun_argv(hosts, 8), {})
    assert "'-o BatchMode=yes'" in line
    assert shlex.split(line.split(" && ", 2)[2].split("; exit")[0])[-9] == f"{BIN}/all_reduce_perf"


def test_srun_line_spans_the_nodes_with_pmix_and_labels():
    hosts = [host("gpu-a", slurm=True, slurm_partition="gpu"), host("gpu-b", slurm=True)]
    with pytest.raises(ClusterError, match="slurm_partition differs"):
        srun_nccl_argv(hosts, "20261201T120000Z-abc123", 4)
    hosts[1] = replace(hosts[1], slurm_partition="gpu")
    argv = srun_nccl_argv(hosts, "20261201T120000Z-abc123", 4)
    assert argv[:13] == [
        "srun", "--job-name=gpufleet-cluster-20261201T120000Z-abc123",
        "--nodelist=gpu-a,gpu-b", "--nodes=2", "--ntasks-per-node=4", "--gres=gpu:4",
        "--mpi=pmix", "--exclusive", "--immediate=30", "--kill-on-bad-exit=1",
        "--export=ALL", "--label", "--quiet",
    ]  # fmt: skip
    assert argv[13] == "--partition=gpu"
    assert argv[-2:] == ["-g", "1"]
    assert nccl.launch_argv(hosts, "r-1", 4)[0] == "srun"


def test_mpirun_refuses_an_ipv6_address_and_mixed_nccl_settings():
    with pytest.raises(ClusterError, match="cluster_address to a host name"):
        mpirun_argv([host("a", address="fd00::1"), host("b")], 1)
    with pytest.raises(ClusterError, match="nccl_ib_hca differs"):
        nccl_env([host("a", nccl_ib_hca="mlx5_0"), host("b", nccl_ib_hca="mlx5_1")])


def test_a_real_two_host_efa_run_is_read_ranks_hosts_and_transport():
    # 2x g4dn (one T4 each) over EFA, mpirun --tag-output (aws-ia/terraform-aws-eks-blueprints)
    out = text("t4-2node-efa-mpirun-tag-output.txt")
    assert rank_hosts(out) == [(0, "test-nccl-efa-worker-0"), (1, "test-nccl-efa-worker-1")]
    hosts = [host("w0", fabric_gbps=10), host("w1", fabric_gbps=10)]
    verdict = nccl.judge(nccl.RunOutcome(0, out), hosts, 1)
    assert verdict["figures"]["network"] == "efa"
    assert verdict["figures"]["ranks"] == 2
    assert verdict["figures"]["max_busbw_gbps"] == 3.15
    assert verdict["status"] == "pass", verdict["reason"]  # 3.15 >= 0.6 x 10 Gbit/s = 0.75
    hosts = [replace(h, fabric_gbps=100) for h in hosts]  # declared 100G: 3.15 < 7.5
    assert nccl.judge(nccl.RunOutcome(0, out), hosts, 1)["status"] == "fail"


def test_a_binary_without_mpi_is_named_from_its_repeated_rank_numbers():
    out = text("a100-pcie-2node-no-mpi-build-trimmed.txt")
    verdict = nccl.judge(nccl.RunOutcome(0, out), [host("testgpu1"), host("testgpu2")], 2)
    assert verdict["status"] == "fail"
    assert "not an MPI build" in verdict["reason"]


def test_ranks_on_fewer_hosts_than_the_group_fail():
    out = text("h100-2node-ib-srun-label.txt")  # 2 nodes x 8 H100 (nccl-tests#290)
    hosts = [host("a"), host("b"), host("c")]
    verdict = nccl.judge(nccl.RunOutcome(0, out), hosts, 8)
    assert verdict["status"] == "fail"
    assert "16 rank(s) on 2 host(s)" in verdict["reason"]


def test_a_failed_or_hung_run_fails_with_its_words():
    verdict = nccl.judge(nccl.RunOutcome(1, "ssh: connect to host b port 22: refused"), [], 1)
    assert verdict["reason"].startswith("all_reduce_perf exited 1: ssh: connect")
    assert "did not finish" in nccl.judge(nccl.RunOutcome(None, ""), [], 1)["reason"]


def test_tcp_sockets_where_the_inventory_expects_efa_fail():
    """EFA fallen back to TCP: the p5 table (AWS README) with NCCL's channel lines of a run that
    crossed hosts on NET/Socket (NVIDIA/nccl#952), put together here; the judge reads both."""
    out = text("h100-2node-ib-srun-label.txt")  # 16 ranks on 2 hosts, NET lines absent
    socket = (FIXTURES / "nccl_debug" / "multi_node_p2p_ipc_and_net_socket.log").read_text()
    hosts = [host("a", nccl_transport="efa"), host("b", nccl_transport="efa")]
    verdict = nccl.judge(nccl.RunOutcome(0, out + socket), hosts, 8)
    assert verdict["status"] == "fail"
    assert "NCCL used socket between the hosts" in verdict["reason"]
    assert "expects efa (nccl_transport)" in verdict["reason"]


P5 = parse_nccl_tests(text("h100-p5-2node-efa-srun-label-table.txt")).max_busbw
P4DE = parse_nccl_tests(text("a100-p4de-2node-efa-srun-label-table.txt")).max_busbw
P4D = parse_nccl_tests(text("a100-p4d-2node-efa-mpirun-error-column.txt")).max_busbw


@pytest.mark.parametrize(
    ("why", "model", "network", "fabric", "busbw", "passed"),
    [
        ("2x p5 over EFA, AWS README", "NVIDIA H100 80GB HBM3", "efa", 3200, P5, True),
        ("2x p4de over EFA, AWS README", "NVIDIA A100-SXM4-80GB", "efa", 400, P4DE, True),
        ("2x p4d over EFA, aws-efa-eks README", "A100-SXM4-40GB", "efa", 400, P4D, True),
        # NVIDIA: "96GB/s is the target ... it's perfect" for 4x 200G (nccl-tests#119)
        ("4x 200G IB, nccl-tests#119", "", "ib", 800, 96.45, True),
        # a ring is only as fast as its slowest node: one node's NICs at a quarter rate
        ("p5, one node at 1/4 rate", "NVIDIA H100 80GB HBM3", "efa", 3200, P5 / 4, False),
        ("p4de, one node at 1/4 rate", "NVIDIA A100-SXM4-80GB", "efa", 400, P4DE / 4, False),
        ("#119, one node at 1/4 rate", "", "ib", 800, 96.45 / 4, False),
        # on NET/IB only the fabric floor is enforced: half the p5 figure clears 0.6 x 3200
        ("p5 figure on IB, half rate", "NVIDIA H100 80GB HBM3", "ib", 3200, P5 / 2, True),
        ("p4de at half rate", "NVIDIA A100-SXM4-80GB", "efa", 400, P4DE / 2, False),
    ],
)
def test_floor_table(why, model, network, fabric, busbw, passed):
    floors = cluster_floors(model, 8, 2, network, fabric)
    assert judge_busbw(busbw, floors)[0] is passed, (why, [f.to_dict() for f in floors])


def test_published_floors_and_advisory_anchor_floors_carry_sources():
    floors = cluster_floors("NVIDIA H100 80GB HBM3", 8, 2, "efa", 3200)
    assert [(f.name, round(f.busbw_gbps, 1), f.enforced) for f in floors] == [
        ("fabric", 240.0, True),
        ("published: 2x p5.48xlarge", 389.8, True),
        ("anchor: nvlink+efa", 800.0, False),
    ]
    assert all(f.source for f in floors)
    passed, _reason, advisory = judge_busbw(P5 or 0.0, floors)
    assert passed and advisory and "advisory 800" in advisory[0]  # AWS's own floor, advisory
    assert [f.name for f in cluster_floors("H100 80GB HBM3", 8, 3, "efa", 3200)] == ["fabric"]


def test_network_of_names_the_slowest_transport_between_hosts():
    assert nccl.network_of({"connections": {"NET/Libfabric": 4, "P2P/IPC": 8}}) == "efa"
    assert nccl.network_of({"connections": {"NET/IB": 4, "NET/Socket": 1}}) == "socket"
    assert nccl.network_of({"connections": {"P2P/IPC": 8}}) == "unknown"


class _NoRun:
    run_id = "r-1"

    def run(self, *_a, **_k):  # pragma: no cover - must not be reached
        raise AssertionError("no command may run")


def test_gpu_less_hosts_and_hosts_without_the_mpi_build_are_skipped_without_running():
    launcher = _NoRun()
    doc, named, _how = nccl.section(launcher, [host("a", gpu_less=True), host("b")])  # type: ignore[arg-type]
    assert doc == {"status": "skipped", "reason": "no GPU"} and named == []
    doc, _n, _h = nccl.section(launcher, [host("a"), host("b", nccl_mpi_bin=None)])  # type: ignore[arg-type]
    assert doc["status"] == "skipped"
    assert doc["reason"].startswith("nccl_tests_mpi is off on b:")
    assert nccl_check(doc)["name"] == "nccl_tests::all_reduce_perf"


def test_a_failing_group_is_rerun_by_pairs_and_the_slow_host_named(monkeypatch):
    hosts = [host("a", gpu_count=8), host("b", gpu_count=8), host("c", gpu_count=8)]
    runs: list[list[str]] = []

    def run_once(_launcher, chosen, _gpus):
        runs.append([h.name for h in chosen])
        return nccl.RunOutcome(0, ",".join(h.name for h in chosen))

    def judge(outcome, _chosen, _gpus):
        bad = "b" in outcome.text.split(",")
        figures = {"max_busbw_gbps": 10.0 if bad else 200.0, "network": "ib", "ranks": 16}
        return {"status": "fail" if bad else "pass", "reason": "", "figures": figures}

    monkeypatch.setattr(nccl, "run_once", run_once)
    monkeypatch.setattr(nccl, "judge", judge)
    doc, named, how = nccl.section(_NoRun(), hosts)  # type: ignore[arg-type]
    assert doc["status"] == "fail" and doc["launcher"] == "mpirun"
    assert named == ["b"]
    assert runs[0] == ["a", "b", "c"] and ["a", "c"] in runs
    assert [p["status"] for p in doc["pairs"]] == ["fail", "pass", "fail"]  # a+b, a+c, b+c
    assert "pairs" in how
    prom = prometheus_text({"group": "g", "run_id": "r", "status": "fail", "culprits": [],
                            "nccl_tests": doc}, "a")  # fmt: skip
    assert 'gpufleet_cluster_nccl_busbw_gbps{group="g",network="ib",run_id="r"} 10' in prom


def test_the_floor_and_parser_docstring_examples_hold():
    import doctest

    import gpufleet.floors.nccl_cluster as floors
    import gpufleet.parsers.nccl as parser

    for module in (floors, parser):
        assert doctest.testmod(module).failed == 0, module.__name__
