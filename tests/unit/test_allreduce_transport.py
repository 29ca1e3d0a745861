"""All-reduce: the NCCL transport from real NCCL_DEBUG=INFO lines, the nccl-tests reference
contract, and the floors by GPU model, count and interconnect.

Log lines: tests/fixtures/nccl_debug (sources in its SOURCES.md).
"""

from __future__ import annotations

import argparse
import json
import types
from pathlib import Path

import pytest

from gpufleet.floors.derived import floors_for
from validation.vendor.nccl_reference import (
    ReferenceError,
    busbw_at,
    from_run,
    from_run_figures,
    from_vendor_section,
    read_reference,
)
from validation.vendor.nccl_transport import expected_kind_missing, parse_transports, transport_of
from validation.workloads import allreduce
from validation.workloads._run import Run
from validation.workloads._topology import GpuTopology

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_debug"


def _log(name: str) -> str:
    return (LOGS / name).read_text()


def test_single_process_p2p_direct_as_tensorflow_drives_8_gpus() -> None:
    found = parse_transports(_log("single_process_p2p_direct.log"))
    assert found["connections"] == {"P2P/direct": 6}
    assert found["kinds"] == ["P2P"]
    assert expected_kind_missing(found, "nvswitch") is None


def test_p2p_ipc_and_net_socket_are_told_apart() -> None:
    found = parse_transports(_log("multi_node_p2p_ipc_and_net_socket.log"))
    assert found["connections"] == {"NET/Socket": 2, "P2P/IPC": 4}
    assert "NET" in (expected_kind_missing(found, "nvlink") or "")


def test_shm_between_nvlinked_gpus_is_a_fault_but_not_on_pcie() -> None:
    found = parse_transports(_log("h800_shm.log"))
    assert found["connections"] == {"SHM": 3}
    assert "SHM" in (expected_kind_missing(found, "nvswitch") or "")
    assert expected_kind_missing(found, "pcie_host_bridge") is None
    assert expected_kind_missing(found, "nvlink_partial") is None  # DGX-1: some pairs no P2P


def test_nvls_channels_and_multicast_support() -> None:
    assert parse_transports(_log("h20_zero_nvls_channels.log"))["nvls_channels"] == 0
    assert parse_transports(_log("nvls_multicast_available.log"))["nvls_available"] == {"0": True}
    off = parse_transports(_log("nvls_multicast_not_available.log"))["nvls_available"]
    assert off == {"5": False, "6": False}
    assert "no NCCL channel lines" in parse_transports("")["summary"]


def test_transport_names() -> None:
    assert transport_of("P2P/IPC/read") == "P2P/IPC"
    assert transport_of("NET/IB/0/GDRDMA") == "NET/IB"
    assert transport_of("SHM/direct/direct") == "SHM"


def test_nccl_tests_reference_contract() -> None:
    ref = read_reference('{"busbw_gbps": 231.4, "bytes": 8589934592, "gpus": 8}')
    assert ref == {
        **{"busbw_gbps": 231.4, "bytes": 8589934592, "gpus": 8, "source": "--nccl-tests"},
        "sizes": {},
    }
    assert read_reference(None) is None
    bad_ones = ('{"gpus": 8}', '{"busbw_gbps": 0, "gpus": 8}', '{"busbw_gbps": 1, "gpus": 1}', "[]")
    for bad in bad_ones:
        with pytest.raises(ReferenceError):
            read_reference(bad)


def test_the_suite_hands_over_what_test_nccl_allreduce_recorded() -> None:
    figures = {
        "validation/test_vendor_diagnostics.py::test_nccl_allreduce[local]": {
            "largest_busbw": 231.4,
            "largest_size": 8589934592,
            "ranks": 8,
            "exit_code": 0,
            "wrong": 0,
            "out_of_bounds": 0,
        }
    }
    assert from_run_figures(figures) == {
        "busbw_gbps": 231.4,
        "bytes": 8589934592,
        "gpus": 8,
        "source": "vendor_diagnostics::nccl_allreduce",
        "sizes": {},
    }
    broken = {k: {**v, "wrong": 3} for k, v in figures.items()}
    assert from_run_figures(broken) is None
    assert from_run_figures({}) is None


def test_the_results_vendor_section_is_read_first() -> None:
    # Keys as gpufleet.vendor.section.nccl_section writes them (a structure of ours, not output).
    section = {
        "status": "pass",
        "gpu_count": 8,
        "busbw_at_largest_gbps": 231.4,
        "largest_size_bytes": 8589934592,
        "exit_code": 0,
        "wrong": 0,
        "out_of_bounds": 0,
    }
    assert from_vendor_section(section) == {
        "busbw_gbps": 231.4,
        "bytes": 8589934592,
        "gpus": 8,
        "source": "vendor.nccl_tests",
        "sizes": {},
    }
    assert from_vendor_section({**section, "exit_code": 1}) is None
    state = types.SimpleNamespace(vendor={"dcgm": None, "nccl_tests": section}, figures={})
    assert from_run(state)["source"] == "vendor.nccl_tests"
    older = types.SimpleNamespace(figures={})  # a RunState without a vendor section
    assert from_run(older) is None


def _run(model: str, count: int, link: str, **args: object) -> Run:
    namespace = argparse.Namespace(quick=False, thresholds=None, nccl_tests=None)
    run = Run(workload="allreduce", args=argparse.Namespace(**{**vars(namespace), **args}))
    run.gpus = [f"/device:GPU:{i}" for i in range(count)]
    run.gpu_model = model
    run.floors = {f.name: f for f in floors_for(model, count, link)}
    return run


@pytest.mark.parametrize(
    ("model", "count", "link", "floor"),
    [
        ("NVIDIA H100 80GB HBM3", 8, "nvlink", 259.0),  # 0.70 x nccl-tests' 8x H100 figure
        ("Tesla V100-SXM2-16GB", 8, "nvlink_partial", 60.0),
        ("NVIDIA H100 80GB HBM3", 2, "nvlink", 30.0),  # not the 8-GPU NVSwitch floor
    ],
)
def test_busbw_floor_follows_model_count_and_interconnect(model, count, link, floor) -> None:
    run = _run(model, count, link)
    assert allreduce.choose_floor(run, GpuTopology(link, count), count) == floor
    assert run.config["floors"]["allreduce.busbw_gbps"]["value"] == floor


def test_the_inventory_override_still_wins() -> None:
    run = _run("NVIDIA H100 80GB HBM3", 8, "nvlink", thresholds='{"allreduce_busbw_min_gbps": 9}')
    assert allreduce.choose_floor(run, GpuTopology("nvlink", 8), 8) == 9.0
    assert run.config["threshold_sources"]["allreduce_busbw_min_gbps"] == "inventory override"


def _spread(busbw: float) -> list[float]:
    """12 repetitions around ``busbw`` with a 1 % spread (a steady NVLink host)."""
    return [busbw * (1 + 0.01 * ((i % 5) - 2) / 2) for i in range(12)]


def test_tf_busbw_is_held_against_nccl_tests_on_the_same_host() -> None:
    ref = '{"busbw_gbps": 480.0, "bytes": 8589934592, "gpus": 8, "sizes": {"1073741824": 370.0}}'
    healthy = _run("NVIDIA H100 80GB HBM3", 8, "nvlink", nccl_tests=ref)
    allreduce._against_nccl_tests(healthy, _spread(350.0), 2**30, 8)  # 0.95 of nccl-tests
    assert healthy.checks[-1]["status"] == "pass"
    assert healthy.metrics["busbw_fraction_of_nccl_tests"] == pytest.approx(350 / 370, rel=0.01)
    slow = _run("NVIDIA H100 80GB HBM3", 8, "nvlink", nccl_tests=ref)
    allreduce._against_nccl_tests(slow, _spread(150.0), 2**30, 8)  # 0.41: TF's path is broken
    assert slow.checks[-1]["status"] == "fail"
    other = _run("NVIDIA H100 80GB HBM3", 4, "nvlink", nccl_tests=ref)
    allreduce._against_nccl_tests(other, _spread(150.0), 2**30, 4)
    assert other.checks[-1]["status"] == "not_applicable"
    assert "8 GPUs, TensorFlow uses 4" in other.checks[-1]["reason"]


def test_tf_busbw_is_compared_with_the_nccl_tests_row_of_the_same_size() -> None:
    """Review 2, N10: the old code divided TF's 1 GiB figure by nccl-tests' largest (8 GiB,
    NVLS on an H100: 480), so a healthy 350 read 0.73, inconclusive against 0.70."""
    sizes = [{"size_bytes": 2**30, "busbw_gbps": 370.0}, {"size_bytes": 2**33, "busbw_gbps": 480.0}]
    section = {"busbw_at_largest_gbps": 480.0, "largest_size_bytes": 2**33, "gpu_count": 8}
    reference = from_vendor_section({**section, "sizes": sizes, "exit_code": 0, "wrong": 0})
    assert reference is not None and busbw_at(reference, 2**30) == 370.0
    run = _run("NVIDIA H100 80GB HBM3", 8, "nvlink", nccl_tests=json.dumps(reference))
    allreduce._against_nccl_tests(run, _spread(350.0), 2**30, 8)
    assert run.checks[-1]["status"] == "pass"
    assert run.config["nccl_tests_at_size"] == {"bytes": 2**30, "busbw_gbps": 370.0}
    largest_only = '{"busbw_gbps": 480.0, "bytes": 8589934592, "gpus": 8}'
    run = _run("NVIDIA H100 80GB HBM3", 8, "nvlink", nccl_tests=largest_only)
    allreduce._against_nccl_tests(run, _spread(350.0), 2**30, 8)
    assert run.checks[-1]["status"] == "not_applicable"
    assert "no row at 1073741824 B" in run.checks[-1]["reason"]
