"""DCGM and nccl-tests gates on the recorded fixtures and on published figures."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import gpufleet.floors.nccl
from gpufleet.floors.nccl import FLOORS, INTERCONNECT_CLASSES, METRICS, find_floor
from gpufleet.parsers import parse_dcgm_diag, parse_nccl_tests
from gpufleet.vendor import NcclFigure, Verdict, figure_of, judge_dcgm, judge_nccl
from gpufleet.vendor.verdict import STATUSES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def dcgm(name: str, exit_code: int | None = None):
    return parse_dcgm_diag((FIXTURES / "dcgm" / name).read_text(encoding="utf-8"), exit_code)


def nccl(name: str, exit_code: int = 0) -> NcclFigure:
    text = (FIXTURES / "nccl_tests" / name).read_text(encoding="utf-8")
    return figure_of(parse_nccl_tests(text), exit_code)


def published(busbw: float, size: int, ranks: int) -> NcclFigure:
    """A figure someone published (not a whole recorded run): busbw at its largest size."""
    return NcclFigure(busbw, busbw, size, busbw, 0, 0, 0, ranks)


# ---- DCGM ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "exit_code", "status", "words"),
    [
        ("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0, "pass", ["80 results passed"]),
        ("dcgm4-diagnostic-8gpu-pass-fragment.json", 0, "pass", ["8 results passed"]),
        ("dcgm3-t400-r3-skip.json", 0, "skip", ["skipped every test", "EUD Test"]),
        (
            "dcgm4-gb10-r1-software-fail.json",
            226,
            "fail",
            ["software failed on GPU 0", "Persistence mode for GPU 0 is disabled", "226"],
        ),
        (
            "dcgm4-text-4.4.1-b200-pcie-fail.txt",
            None,
            "fail",
            ["pcie failed on the system", "couldn't be parsed"],
        ),
        (
            "dcgm3-text-3.3.1-gpu0-fail-excerpt.txt",
            None,
            "fail",
            ["GPU Memory failed on GPU 0", "cuCtxCreate", "Diagnostic failed on the system"],
        ),
        ("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 226, "error", ["cannot be trusted", "exited 226"]),
    ],
)
def test_dcgm_gate_on_recorded_outputs(name, exit_code, status, words):
    verdict = judge_dcgm(dcgm(name, exit_code), level=1)
    assert verdict.status == status
    for word in words:
        assert word in verdict.reason
    assert verdict.check == "dcgm_diag"
    json.dumps(verdict.to_dict())


def test_dcgm_fail_lists_every_failure_in_the_figures():
    verdict = judge_dcgm(dcgm("dcgm3-text-3.3.1-gpu0-fail-excerpt.txt"))
    failures = verdict.figures["failures"]
    assert [(f["test"], f["gpu"]) for f in failures] == [
        ("GPU Memory", "0"),
        ("Diagnostic", None),
        ("Targeted Stress", None),
    ]
    assert verdict.figures["counts"] == {"pass": 1, "fail": 3, "skip": 0, "warn": 0}


@pytest.mark.parametrize("text", ["", "nonsense", '{"DCGM Diagnostic": {"test_categories": []}}'])
def test_dcgm_gate_never_passes_untrusted_output(text):
    verdict = judge_dcgm(parse_dcgm_diag(text))
    assert verdict.status == "error"
    assert "cannot be trusted" in verdict.reason


def test_dcgm_gate_skips_without_gpu_and_in_mig_mode_before_reading_output():
    passing = dcgm("dcgm3-nvvs-3.1.0-pass-8gpu.txt")
    no_gpu = judge_dcgm(passing, gpu_present=False)
    assert (no_gpu.status, "no NVIDIA GPU" in no_gpu.reason) == ("skip", True)
    mig = judge_dcgm(passing, mig_enabled=True)
    assert mig.status == "skip" and "MIG" in mig.reason
    assert judge_dcgm(None).status == "error"


# ---- nccl-tests floors ---------------------------------------------------------------------


def test_every_floor_is_well_formed_and_sourced():
    keys = set()
    for floor in FLOORS:
        assert floor.interconnect in INTERCONNECT_CLASSES
        assert floor.metric in METRICS
        assert floor.busbw_gbps > 0 and floor.measured_at > 0 and floor.gpu_count > 0
        assert "@" in floor.source or "#" in floor.source  # repository@commit or issue
        key = (floor.gpu_model.lower(), floor.gpu_count, floor.interconnect)
        assert key not in keys, f"two floors for {key}"
        keys.add(key)
    sources = {floor.source.removeprefix("0.9 x ").split("/")[0] for floor in FLOORS}
    assert {"NVIDIA", "aws-samples", "GoogleCloudPlatform"} <= sources


@pytest.mark.parametrize(
    ("name", "model", "count", "interconnect", "status", "words"),
    [
        # healthy recorded runs against floors that exist
        ("a100-8gpu-old-header-nccl-info.txt", "NVIDIA A100-SXM4-40GB", 8, "nvlink", "pass",
         ["235.26 GB/s >= floor 180"]),
        ("h100-8gpu-single-node-ib-cluster.txt", "NVIDIA H100 80GB HBM3", 8, "nvlink", "pass",
         ["476.53 GB/s >= floor 333", "measured at 17179869184 B"]),
        ("h100-2node-new-header.txt", "NVIDIA H100 80GB HBM3", 16, "nvlink+tcpxo", "pass",
         ["338.82 GB/s >= floor 90"]),
        # below AWS's advisory floor: reported as a warning, as AWS does
        ("a100-p4d-2node-efa-mpirun-error-column.txt", "A100-SXM4-40GB", 16, "nvlink+efa",
         "warn", ["max busbw 32.84 GB/s < advisory floor 300"]),
        # no floor known: the figure is reported, not passed
        ("h100-2node-ib-srun-label.txt", "NVIDIA H100 80GB HBM3", 16, "nvlink+ib", "no_floor",
         ["no floor known", "155.57 GB/s"]),
        ("t4-2node-efa-mpirun-tag-output.txt", "Tesla T4", 2, "nvlink+efa", "no_floor",
         ["no floor known"]),
    ],
)  # fmt: skip
def test_nccl_gate_on_recorded_runs(name, model, count, interconnect, status, words):
    verdict = judge_nccl(nccl(name), gpu_model=model, gpu_count=count, interconnect=interconnect)
    assert verdict.status == status, verdict.reason
    for word in words:
        assert word in verdict.reason
    if status in ("pass", "warn"):
        assert verdict.source and verdict.figures["floor_gbps"] > 0
    json.dumps(verdict.to_dict())


@pytest.mark.parametrize(
    ("figure", "model", "interconnect", "status"),
    [
        # NVIDIA (nccl-tests#212): 8 H100 with NVLink SHARP peak at ~480 GB/s busbw
        (published(480.0, 16 << 30, 8), "NVIDIA H100 80GB HBM3", "nvlink", "pass"),
        # the same H100 board when NCCL runs plain rings (NCCL_ALGO=RING): ~370 GB/s, healthy
        # (review 2, N8: Azure's 460 failed it)
        (published(370.0, 16 << 30, 8), "NVIDIA H100 80GB HBM3", "nvlink", "pass"),
        # a healthy HGX A100 at ~200 GB/s (nccl-tests#149; Azure's 228 failed it)
        (published(200.0, 8 << 30, 8), "NVIDIA A100-SXM4-80GB", "nvlink", "pass"),
        # below 0.9 x the healthy ring: a degraded fabric
        (published(300.0, 16 << 30, 8), "NVIDIA H100 80GB HBM3", "nvlink", "fail"),
        # nccl-tests#178: 8 A100, 208 GB/s while rings stay on NVLink, 20 GB/s once the
        # ring crosses PCIe/SYS
        (published(20.0, 12 << 30, 8), "NVIDIA A100-SXM4-40GB", "nvlink", "fail"),
        (published(230.0, 8 << 30, 8), "NVIDIA A100-SXM4-80GB", "nvlink", "pass"),
    ],
)
def test_nccl_gate_on_published_figures(figure, model, interconnect, status):
    verdict = judge_nccl(figure, gpu_model=model, gpu_count=8, interconnect=interconnect)
    assert verdict.status == status, verdict.reason


def test_exit_code_wrong_results_and_out_of_bounds_fail_whatever_the_bandwidth():
    healthy = nccl("a100-8gpu-old-header-nccl-info.txt")
    args = {"gpu_model": "A100-SXM4-40GB", "gpu_count": 8, "interconnect": "nvlink"}
    assert judge_nccl(healthy, **args).status == "pass"
    crashed = judge_nccl(nccl("a100-8gpu-old-header-nccl-info.txt", exit_code=1), **args)
    assert crashed.status == "fail" and "exited 1" in crashed.reason
    text = (FIXTURES / "nccl_tests" / "h100-2node-new-header.txt").read_text()
    wrong = text.replace(
        "135.8    0.00    0.00      0    123.5    0.00    0.00      0",
        "135.8    0.00    0.00      3    123.5    0.00    0.00      0",
    )
    verdict = judge_nccl(
        figure_of(parse_nccl_tests(wrong)),
        gpu_model="H100 80GB HBM3",
        gpu_count=16,
        interconnect="nvlink+tcpxo",
    )
    assert verdict.status == "fail" and "3 wrong result(s)" in verdict.reason
    bounds = NcclFigure(300.0, 300.0, 8 << 30, 300.0, 0, 2, 0, 8)
    assert judge_nccl(bounds, **args).status == "fail"


def test_nccl_gate_errors():
    args = {"gpu_model": "A100-SXM4-40GB", "gpu_count": 8}
    assert judge_nccl(None, interconnect="nvlink", **args).status == "error"
    unknown = judge_nccl(published(300.0, 1 << 30, 8), interconnect="nvswitch", **args)
    assert unknown.status == "error" and "not one of" in unknown.reason
    mismatch = judge_nccl(published(300.0, 1 << 30, 4), interconnect="nvlink", **args)
    assert mismatch.status == "error" and "used 4 GPUs" in mismatch.reason


def test_find_floor_matches_names_as_nvml_and_nccl_tests_print_them():
    assert find_floor("NVIDIA H200", 8, "nvlink") is not None
    assert find_floor("h200", 8, "nvlink") is not None
    assert find_floor("NVIDIA H200", 8, "pcie_switch") is None


def test_statuses_and_doctests():
    assert set(STATUSES) == {"pass", "fail", "error", "skip", "warn", "no_floor"}
    assert Verdict("x", "pass", "ok").to_dict()["figures"] == {}
    outcome = doctest.testmod(gpufleet.floors.nccl)
    assert outcome.attempted > 0 and outcome.failed == 0


def test_interconnect_class():
    from gpufleet.floors.nccl import interconnect_class

    assert interconnect_class("pcie_host_bridge") == "pcie_host_bridge"
    assert interconnect_class("nvlink", "tcpxo") == "nvlink+tcpxo"
    with pytest.raises(ValueError, match="unknown interconnect class 'single_gpu'"):
        interconnect_class("single_gpu")
    with pytest.raises(ValueError, match="no multi-node floors over 'cross_socket'"):
        interconnect_class("cross_socket", "ib")


def test_a_pass_that_carries_a_dcgm_message_is_reported():
    # DCGM#284: a memory test can log DCGM_FR_MEMORY_ALLOC and still PASS. Built here from
    # the recorded 8-GPU document with a warning added to GPU 5's passing result.
    document = json.loads(
        (FIXTURES / "dcgm" / "dcgm4-diagnostic-8gpu-pass-fragment.json").read_text()
    )
    results = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    results[5]["warnings"] = [{"warning": "Could not allocate enough memory", "error_id": 65}]
    verdict = judge_dcgm(parse_dcgm_diag(json.dumps(document)))
    assert verdict.status == "pass"
    assert "1 passed with a DCGM message" in verdict.reason
    assert verdict.figures["passed_with_messages"] == [
        {"test": "diagnostic", "gpu": "5", "message": "Could not allocate enough memory"}
    ]


def test_an_inventory_floor_replaces_the_table_and_judges_an_unknown_machine():
    figure = nccl("t4-2node-efa-mpirun-tag-output.txt")
    args = {"gpu_model": "Tesla T4", "gpu_count": 2, "interconnect": "nvlink+efa"}
    assert judge_nccl(figure, **args).status == "no_floor"
    low = judge_nccl(figure, override_gbps=3.0, **args)
    assert low.status == "pass" and low.source == "the inventory's floor for this host"
    high = judge_nccl(figure, override_gbps=10.0, **args)
    assert high.status == "fail" and "3.12 GB/s < floor 10 GB/s" in high.reason
