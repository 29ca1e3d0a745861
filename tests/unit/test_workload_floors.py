"""The workloads' view of gpufleet.floors.derived: the host's kind, calibration, the evidence."""

from __future__ import annotations

import argparse

import pytest

from validation.workloads._floors import host_kind, load_floors, read_calibration
from validation.workloads._run import NO_GPU, Run, WorkloadError

A100 = "NVIDIA A100-SXM4-40GB"


def _run(gpus: int, model: str | None = A100, topology: str | None = "nvlink") -> Run:
    run = Run(workload="mixed_precision", args=argparse.Namespace(quick=True))
    run.gpus = [f"/device:GPU:{i}" for i in range(gpus)]
    run.gpu_model = model
    if topology is not None:
        run.config["topology"] = {"name": topology, "reason": "from the test"}
    return run


def test_an_8_gpu_nvswitch_host_faces_the_published_resnet50_floor() -> None:
    run = _run(8)
    load_floors(run, None)
    floor = run.floor("resnet50.images_per_s.amp")
    assert floor is not None and floor.value == pytest.approx(1900.0)
    assert run.config["host_kind"] == {"gpu_model": A100, "gpu_count": 8, "interconnect": "nvlink"}
    evidence = run.config["floors"]["resnet50.images_per_s.amp"]
    assert evidence["value"] == pytest.approx(1900.0)
    assert evidence["origin"].startswith("published")


def test_one_gpu_is_single_gpu_whatever_the_topology_says() -> None:
    run = _run(1, topology=None)
    assert host_kind(run) == (A100, 1, "single_gpu")


def test_no_gpu_means_no_floors_and_the_reason_is_the_evidence() -> None:
    run = _run(0)
    load_floors(run, None)
    assert run.floors == {} and run.floors_reason == NO_GPU
    assert run.floor("mixed_precision.speedup.fp16") is None
    assert run.config["floors"]["mixed_precision.speedup.fp16"]["origin"] == NO_GPU


def test_an_unknown_model_is_reported_not_failed() -> None:
    run = _run(2, model="NVIDIA Imaginary 9000")
    load_floors(run, None)
    assert run.floors == {}
    assert "Imaginary" in (run.floors_reason or "")


def test_an_unknown_interconnect_gives_no_floors() -> None:
    run = _run(4, topology="unknown")
    assert isinstance(host_kind(run), str)


def _calibration(model: str = A100, count: int = 8) -> dict:
    return {
        "schema": 1,
        "gpu_model": model,
        "gpu_count": count,
        "interconnect": "nvswitch",
        "host": "gpu01",
        "date": "2026-12-01",
        "margin": 0.9,
        "figures": {"resnet50.images_per_s.amp": {"values": [2000.0, 2100.0, 2200.0]}},
    }


def test_calibration_replaces_the_published_floor_and_names_itself() -> None:
    run = _run(8)
    load_floors(run, read_calibration(__import__("json").dumps(_calibration())))
    floor = run.floor("resnet50.images_per_s.amp")
    assert floor.value == pytest.approx(0.9 * 2100.0)
    assert run.config["floors"]["resnet50.images_per_s.amp"]["origin"].startswith("calibration")
    # Figures the file does not calibrate keep their published floor.
    assert run.floor("mixed_precision.speedup.fp16").origin.startswith("published")


def test_a_calibration_for_another_kind_of_host_is_an_error_that_says_so() -> None:
    run = _run(8)
    with pytest.raises(WorkloadError, match="not NVIDIA A100"):
        load_floors(run, _calibration(count=4))


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", "@/nonexistent/cal.json"])
def test_a_bad_calibration_argument_is_refused_with_the_fix(text: str) -> None:
    with pytest.raises(WorkloadError, match="--calibration"):
        read_calibration(text)


V100 = "Tesla V100-SXM2-16GB"


@pytest.mark.parametrize("measured", ["cross_socket", "pcie_host_bridge", "pcie_switch"])
def test_n14_a_dgx1v_with_every_nvlink_down_faces_the_cube_mesh_floor(measured: str) -> None:
    # Old behaviour: the measured class set the floors, cross_socket 3 GB/s, which the
    # review's 5-10 GB/s of a DGX-1V over PCIe passes.
    run = _run(8, model=V100, topology=measured)
    assert host_kind(run) == (V100, 8, "nvlink_partial")
    load_floors(run, None)
    floor = run.floor("allreduce.busbw_gbps")
    assert floor is not None and floor.value == pytest.approx(60.0)
    assert floor.value > 10.0  # the fallback's 5-10 GB/s fails it
    assert run.config["topology_expected"]["measured"] == measured


def test_n14_healthy_boards_and_pcie_cards_keep_their_measured_class() -> None:
    assert host_kind(_run(8, model=V100, topology="nvlink_partial"))[2] == "nvlink_partial"
    assert host_kind(_run(8, topology="nvlink"))[2] == "nvlink"  # HGX A100: NV# everywhere
    assert host_kind(_run(8, topology="pcie_host_bridge"))[2] == "nvlink"  # A100 SXM4, links down
    assert host_kind(_run(2, model="Tesla T4", topology="pcie_host_bridge"))[2] == (
        "pcie_host_bridge"
    )


def test_the_inventory_xla_speedup_min_is_the_xla_floor_the_workload_judges() -> None:
    # Issue 33: the documented override example set a threshold no workload read.
    from validation.workloads._common import load_run_limits
    from validation.workloads._throughput import speed_skip

    run = _run(1, model="NVIDIA A100-SXM4-80GB")
    run.compute_capability = (8, 0)
    run.args.thresholds = '{"xla_speedup_min": 1.2}'
    load_run_limits(run, None)
    assert speed_skip(run, "xla.speedup.tf32") == (1.2, None)  # judged against the override
    assert run.config["floors"]["xla.speedup.tf32"]["origin"].startswith("inventory override")
    run.args.thresholds = None
    load_run_limits(run, None)
    _, skip = speed_skip(run, "xla.speedup.tf32")
    assert skip is not None and skip.startswith("not judged")  # none: reported only
