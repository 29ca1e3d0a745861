"""GPU interconnect classes from real `nvidia-smi topo -m` outputs and the floor they pick."""

from __future__ import annotations

import argparse
import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from gpufleet.parsers import parse_nvidia_smi_topo
from validation.verdicts.thresholds import TOPOLOGY_CLASSES
from validation.workloads._common import Run
from validation.workloads._topology import GpuTopology, classify, host_topology
from validation.workloads.allreduce import choose_floor

TOPO = Path(__file__).parent.parent / "fixtures" / "topo"  # real outputs, see SOURCES.md


@pytest.mark.parametrize(
    ("fixture", "expected", "gpus", "slowest", "links"),
    [
        ("a100-8gpu-nv12-17nic.txt", "nvlink", 8, "NV12", {"NV12": 28}),
        ("h100-8gpu-nv18-tabs-excerpt.txt", "nvlink", 8, "NV18", {"NV18": 28}),
        ("a10-4gpu-2nic.txt", "cross_socket", 4, "SYS", {"SYS": 6}),
        ("gtx1080ti-2gpu-phb.txt", "pcie_host_bridge", 2, "PHB", {"PHB": 1}),
        ("rtx4090-8gpu-tabs-no-legend.txt", "cross_socket", 8, "SYS", {"SYS": 28}),
        ("t4-4gpu-cpu-affinity-only.txt", "cross_socket", 4, "SYS", {"NODE": 3, "SYS": 3}),
    ],
)
def test_recorded_topologies_classify(
    fixture: str, expected: str, gpus: int, slowest: str, links: dict[str, int]
) -> None:
    topology = classify(parse_nvidia_smi_topo((TOPO / fixture).read_text()))
    assert (topology.name, topology.gpus, topology.slowest, topology.links) == (
        expected,
        gpus,
        slowest,
        links,
    )
    assert topology.name in TOPOLOGY_CLASSES


def _matrix(rows: list[list[str]]) -> str:
    """A tab-separated matrix in nvidia-smi's layout (synthetic: for the classes no recorded
    fixture shows)."""
    header = "\t" + "\t".join(f"GPU{i}" for i in range(len(rows))) + "\tCPU Affinity\n"
    body = "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else cell for j, cell in enumerate(row)) + "\t0-7\n"
        for i, row in enumerate(rows)
    )
    return header + body


def test_switch_nvlink_partial_single_and_unknown_words() -> None:
    switch = _matrix([["X", "PIX", "PXB"], ["PIX", "X", "PXB"], ["PXB", "PXB", "X"]])
    assert classify(parse_nvidia_smi_topo(switch)).slowest == "PXB"
    assert classify(parse_nvidia_smi_topo(switch)).name == "pcie_switch"
    partial = _matrix([["X", "NV2", "SYS"], ["NV2", "X", "NV1"], ["SYS", "NV1", "X"]])
    topology = classify(parse_nvidia_smi_topo(partial))
    assert (topology.name, topology.slowest) == ("nvlink_partial", "SYS")
    assert "2 of 3 GPU pairs NVLink" in topology.reason
    mixed_nvlink = classify(parse_nvidia_smi_topo(_matrix([["X", "NV4"], ["NV4", "X"]])))
    assert (mixed_nvlink.name, mixed_nvlink.slowest) == ("nvlink", "NV4")
    assert classify(parse_nvidia_smi_topo(_matrix([["X"]]))).name == "single_gpu"
    old_driver = classify(parse_nvidia_smi_topo(_matrix([["X", "SOC"], ["SOC", "X"]])))
    assert old_driver.name == "cross_socket"
    odd = classify(parse_nvidia_smi_topo(_matrix([["X", "C2C"], ["C2C", "X"]])))
    assert odd.name == "unknown"
    assert "C2C" in odd.reason and "allreduce_busbw_min_gbps" in odd.reason


def test_a_matrix_cut_short_is_unknown_not_a_crash() -> None:
    text = _matrix([["X", "PHB", "PHB"], ["PHB", "X", "PHB"], ["PHB", "PHB", "X"]])
    cut = "\n".join(text.splitlines()[:2])  # header and GPU0's row only
    topology = classify(parse_nvidia_smi_topo(cut))
    assert topology.name == "unknown"
    assert "cut short" in topology.reason


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_host_topology_runs_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = TOPO / "a100-8gpu-nv12-17nic.txt"
    cat = shutil.which("cat")  # PATH holds only the fake nvidia-smi from here on
    _fake_nvidia_smi(tmp_path, monkeypatch, f'[ "$*" = "topo -m" ] && exec {cat} "{recorded}"')
    assert host_topology(True).name == "nvlink"


def test_host_topology_falls_back_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert host_topology(False) == GpuTopology("no_gpu", reason="no GPU")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi at all
    assert "could not run" in host_topology(True).reason
    _fake_nvidia_smi(tmp_path, monkeypatch, "echo 'Failed to initialize NVML' >&2; exit 9")
    failed = host_topology(True)
    assert (failed.name, failed.reason) == (
        "unknown",
        "nvidia-smi topo -m exited 9: Failed to initialize NVML",
    )
    _fake_nvidia_smi(tmp_path, monkeypatch, "echo 'No devices were found'")
    assert "not understood" in host_topology(True).reason
    monkeypatch.setitem(sys.modules, "gpufleet.parsers", None)  # payload without gpufleet
    assert "not importable" in host_topology(True).reason


def _run(model: str | None, overrides: dict[str, float] | None = None) -> Run:
    args = argparse.Namespace(quick=True, seed=0, thresholds=json.dumps(overrides or {}))
    run = Run(workload="allreduce", args=args)
    run.compute_capability, run.gpu_model = (8, 0), model
    return run


def test_floor_layers_topology_then_model_then_inventory() -> None:
    nvswitch = GpuTopology("nvlink", gpus=8)
    run = _run("NVIDIA A800-SXM4-80GB")  # no [gpu_model] entry: the class decides
    assert choose_floor(run, nvswitch, 8) == 205.0
    assert run.config["threshold_sources"]["allreduce_busbw_min_gbps"] == (
        "allreduce_topology nvlink, 8 GPUs"
    )
    assert run.config["thresholds"]["allreduce_busbw_min_gbps"] == 205.0
    assert choose_floor(_run(None), nvswitch, 4) == 10.8  # no 4-GPU figure: class default
    h100 = _run("NVIDIA H100 80GB HBM3")
    assert choose_floor(h100, nvswitch, 8) == 414.0  # the model's floor wins
    assert h100.config["threshold_sources"]["allreduce_busbw_min_gbps"].startswith("gpu_model")
    pinned = _run("NVIDIA H100 80GB HBM3", {"allreduce_busbw_min_gbps": 300.0})
    assert choose_floor(pinned, nvswitch, 8) == 300.0  # the inventory wins over both
    assert pinned.config["threshold_sources"]["allreduce_busbw_min_gbps"] == "inventory override"
    assert choose_floor(_run("NVIDIA L4"), GpuTopology("cross_socket"), 4) == 3.0
    no_gpu = _run(None)
    no_gpu.compute_capability = None
    assert choose_floor(no_gpu, GpuTopology("no_gpu"), 2) == 0.0
