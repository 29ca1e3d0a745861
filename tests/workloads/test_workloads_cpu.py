"""Every workload's quick tier on the CPU: JSON shape, correctness decides, speed not applicable.

Each workload runs as on a host: `python -m validation.workloads.<name> --quick --json PATH`
in a subprocess. CPU timings swing 2x between runs (DESIGN.md), so nothing here asserts speed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from validation.tiers import FULL_WORKLOADS

pytestmark = pytest.mark.workload

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = FULL_WORKLOADS  # every workload there is
TOP_LEVEL = {
    "workload",
    "schema_version",
    "host",
    "started_at",
    "duration_s",
    "devices",
    "config",
    "measurements",
    "metrics",
    "gpu_utilization",
    "gpu_utilization_reason",
    "checks",
    "verdict",
}
STATUSES = {"pass", "fail", "inconclusive", "not_applicable"}


if importlib.util.find_spec("tensorflow") is None:
    pytest.skip(
        "TensorFlow is not installed: install the 'workloads' extra (tensorflow-cpu)",
        allow_module_level=True,
    )


def run_workload(name: str, *extra: str, tmp: Path) -> tuple[int, dict[str, Any], dict, float]:
    """Exit status, the printed document, the --json file's document, and wall seconds."""
    out = tmp / f"{name}.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # CPU even on a GPU machine
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            f"validation.workloads.{name}",
            "--quick",
            "--json",
            str(out),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    seconds = time.monotonic() - start
    assert proc.stdout.strip(), f"{name} printed nothing; stderr:\n{proc.stderr[-3000:]}"
    printed = json.loads(proc.stdout)
    written = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, printed, written, seconds


@cache
def quick_result(name: str) -> tuple[int, dict[str, Any], dict, float, str]:
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix=f"workload-{name}-"))
    status, printed, written, seconds = run_workload(name, tmp=tmp)
    return status, printed, written, seconds, str(tmp)


@pytest.mark.parametrize("name", WORKLOADS)
def test_quick_tier_document(name: str) -> None:
    status, doc, written, seconds, _ = quick_result(name)
    assert status == 0, doc["verdict"]
    assert doc == written  # --json PATH holds exactly what was printed
    assert set(doc) == TOP_LEVEL
    assert doc["workload"] == name
    assert doc["schema_version"] == 1
    assert doc["duration_s"] > 0
    assert doc["started_at"].endswith("+00:00")
    assert doc["devices"] and all(d["type"] == "CPU" for d in doc["devices"])
    assert all(
        set(d) >= {"type", "name", "compute_capability", "memory_mib"} for d in doc["devices"]
    )
    assert doc["config"]["quick"] is True
    assert doc["config"]["thresholds"], "the thresholds used are recorded"
    assert doc["gpu_utilization"] is None
    assert doc["gpu_utilization_reason"].startswith("no GPU")
    assert doc["checks"]
    for check in doc["checks"]:
        # gemm attaches the NVML telemetry of its window and the per-GPU figures to its checks.
        extra = {"evidence", "telemetry", "per_gpu"}
        assert set(check) - extra == {"name", "kind", "status", "reason"}
        assert check["status"] in STATUSES and check["reason"]
        if check["kind"] == "speed" and "evidence" in check:
            # The raw pairs or samples, for the verdict over every process (validation.processes).
            (run,) = check["evidence"]["runs"]
            assert run and check["evidence"]["type"] in ("pairs", "samples")
    assert doc["verdict"]["status"] == "pass", doc["verdict"]
    assert seconds < 60, f"{name} --quick took {seconds:.1f} s"


@pytest.mark.parametrize("name", WORKLOADS)
def test_correctness_decides_and_speed_is_not_applicable(name: str) -> None:
    _, doc, _, _, _ = quick_result(name)
    kinds = {c["kind"] for c in doc["checks"]}
    assert "correctness" in kinds
    for check in doc["checks"]:
        if check["kind"] in ("correctness", "evidence"):
            # The only correctness check allowed to sit out on CPU is TF32's (a GPU mode).
            assert check["status"] == "pass" or check["name"] == "tf32_product", check
        else:
            assert check == {**check, "status": "not_applicable", "reason": "no GPU"}


def test_mirrored_runs_on_two_logical_cpus_and_matches_one_device() -> None:
    _, doc, _, _, _ = quick_result("mirrored")
    assert [d["name"] for d in doc["devices"]] == ["/device:CPU:0", "/device:CPU:1"]
    losses = doc["measurements"]["losses"]
    assert losses["mirrored"] == pytest.approx(losses["single"], rel=1e-5)
    ratios = doc["measurements"]["ab"]["ratios"]
    assert len(ratios) >= 8  # measured even though not judged


def test_xla_compiled_with_fusions() -> None:
    _, doc, _, _, _ = quick_result("xla")
    assert doc["metrics"]["hlo_fusion_mentions"] > 0


def test_allreduce_sum_and_bus_bandwidth_formula() -> None:
    _, doc, _, _, _ = quick_result("allreduce")
    assert doc["config"]["ranks"] == 2
    for row in doc["measurements"]["sizes"]:
        for algbw, busbw in zip(row["algbw_gbps"], row["busbw_gbps"], strict=True):
            assert busbw == pytest.approx(algbw * 2 * (2 - 1) / 2)


def test_gemm_runs_every_device_at_once_and_reports_each() -> None:
    _, doc, _, _, _ = quick_result("gemm")
    assert [d["name"] for d in doc["devices"]] == ["/device:CPU:0", "/device:CPU:1"]
    for precision in ("fp32", "fp16", "bf16"):
        per_device = doc["measurements"][f"{precision}_per_gpu"]
        assert set(per_device) == {"CPU:0", "CPU:1"}
        assert all(entry["repetitions"] >= 3 for entry in per_device.values())
        assert set(doc["metrics"][f"tflops.{precision}"]) == {"CPU:0", "CPU:1"}
        assert doc["metrics"][f"{precision}_tflops"] == min(
            doc["metrics"][f"tflops.{precision}"].values()
        )


def test_memory_growth_second_process_trained() -> None:
    _, doc, _, _, _ = quick_result("memory_growth")
    second = doc["measurements"]["second_process"]
    assert second["exit_status"] == 0
    assert second["verdict"]["status"] == "pass"


def test_a_threshold_override_reaches_the_check_and_can_fail_it(tmp_path: Path) -> None:
    """rtol = atol = 0 cannot hold for split vs whole-batch float sums: the check must fail."""
    status, doc, _, _ = run_workload(
        "grad_accumulation",
        "--thresholds",
        json.dumps({"grad_accumulation_rtol": 0, "grad_accumulation_atol": 0}),
        tmp=tmp_path,
    )
    assert status == 0
    assert doc["config"]["thresholds"]["grad_accumulation_rtol"] == 0.0
    assert doc["verdict"]["status"] == "fail"
    assert doc["checks"][0]["status"] == "fail"


def test_unknown_threshold_override_fails_with_a_hint(tmp_path: Path) -> None:
    status, doc, written, _ = run_workload(
        "grad_accumulation", "--thresholds", '{"grad_accumulation_rtl": 1}', tmp=tmp_path
    )
    assert status == 1
    assert doc == written
    assert doc["verdict"]["status"] == "fail"
    assert "did you mean 'grad_accumulation_rtol'" in doc["verdict"]["reason"]
