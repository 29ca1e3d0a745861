"""Every workload's quick tier on the CPU: JSON shape, correctness decides, speed not applicable.

Each workload runs as on a host: `python -m validation.workloads.<name> --quick --json PATH`
in a subprocess. CPU timings swing 2x between runs (DESIGN.md), so nothing here asserts speed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufleet.floors.checks import figures_from
from gpufleet.floors.derived import floors_for
from tests.workloads.quick_runs import quick_result, run_workload
from validation.verdicts.tiers import FULL_WORKLOADS

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


@pytest.mark.parametrize("name", WORKLOADS)
def test_quick_tier_document(name: str, record_property: Callable[[str, object], None]) -> None:
    status, doc, written, seconds, _ = quick_result(name)
    # Reported (JUnit property, --durations), not asserted: a wall time on a shared 2-core
    # machine says how loaded it was. The tier's budget is CI's, per phase.
    record_property("quick_wall_s", round(seconds, 1))
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
    assert doc["config"].get("thresholds") or doc["config"].get("floors"), "evidence recorded"
    assert doc["gpu_utilization"] is None
    assert doc["gpu_utilization_reason"].startswith("no GPU")
    assert doc["checks"]
    for check in doc["checks"]:
        # gemm attaches the NVML telemetry of its window and the per-GPU figures to its checks.
        extra = {"evidence", "telemetry", "per_gpu"}
        assert set(check) - extra == {"name", "kind", "status", "reason"}
        assert check["status"] in STATUSES and check["reason"]
        if check["kind"] == "speed" and "evidence" in check:
            # The raw pairs or samples, for the verdict over every process
            # (validation.verdicts.processes).
            (run,) = check["evidence"]["runs"]
            assert run and check["evidence"]["type"] in ("pairs", "samples")
    assert doc["verdict"]["status"] == "pass", doc["verdict"]


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


@pytest.mark.parametrize(
    ("name", "figures"),
    [
        ("resnet50", {"resnet50.images_per_s.fp32", "resnet50.images_per_s.amp"}),
        ("bert_large", {"bert_large.sequences_per_s.fp32", "bert_large.sequences_per_s.amp"}),
        ("mixed_precision", {"mixed_precision.speedup.fp16", "mixed_precision.speedup.bf16"}),
        ("xla", {"xla.speedup.fp32"}),
    ],
)
def test_figures_carry_the_names_of_their_floors(name: str, figures: set[str]) -> None:
    """`gpufleet thresholds --judge` reads the document: every figure is a floor's name."""
    _, doc, _, _, _ = quick_result(name)
    got = figures_from(doc)
    assert figures <= set(got), sorted(got)
    assert all(isinstance(got[f], float) and got[f] > 0 for f in figures)
    kinds = [("Tesla V100-SXM2-16GB", 1, "single_gpu"), ("NVIDIA A100-SXM4-40GB", 1, "single_gpu")]
    assert figures <= {f.name for kind in kinds for f in floors_for(*kind)}
    for figure in figures:  # the floor asked for is recorded, with why it has no value here
        assert doc["config"]["floors"][figure] == {"value": None, "origin": "no GPU"}


def test_reference_steps_train_at_tiny_size_and_report_throughput() -> None:
    for name in ("resnet50", "bert_large"):
        _, doc, _, _, _ = quick_result(name)
        assert {c["name"]: c["status"] for c in doc["checks"]} == {
            "trains_fp32": "pass",
            "throughput_fp32": "not_applicable",
            "trains_amp": "pass",
            "throughput_amp": "not_applicable",
        }
        for precision in ("fp32", "amp"):
            losses = doc["measurements"]["losses"][precision]
            assert losses[-1] < losses[0]
            assert len(doc["measurements"]["seconds"][precision]) >= 3


def test_full_size_resnet50_is_resnet50_v1_5() -> None:
    import tensorflow as tf

    from validation.workloads._refsteps import RESNET50_GPU, resnet50

    model = resnet50(tf.keras, RESNET50_GPU)
    trainable = sum(int(tf.size(v)) for v in model.trainable_variables)
    assert trainable == 25_557_032  # torchvision's resnet50 (v1.5) count
    assert model.output.shape[-1] == 1000 and model.output.dtype == "float32"


def test_mirrored_runs_on_two_logical_cpus_and_matches_one_device() -> None:
    _, doc, _, _, _ = quick_result("mirrored")
    assert [d["name"] for d in doc["devices"]] == ["/device:CPU:0", "/device:CPU:1"]
    losses = doc["measurements"]["losses"]
    assert losses["mirrored"] == pytest.approx(losses["single"], rel=1e-5)
    ratios = doc["measurements"]["ab"]["ratios"]
    assert len(ratios) >= 6  # the ResNet-50 arms are measured even though not judged
    assert doc["metrics"]["scaling_efficiency"] > 0
    assert doc["config"]["floors"]["mirrored.scaling_efficiency"]["origin"] == "no GPU"
    assert doc["config"]["speed_model"].startswith("ResNet-50 v1.5 amp")


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


def test_input_pipeline_naive_arm_is_naive_and_tuned_arm_does_not_cache() -> None:
    import numpy as np
    import tensorflow as tf

    from validation.workloads.input_pipeline import QUICK, _pipelines

    images = np.zeros((64, QUICK["image"], QUICK["image"], 3), np.uint8)
    pipelines = _pipelines(tf, images, np.zeros(64, np.int32), QUICK, 1, "/device:CPU:0")
    naive = pipelines["naive"].options()
    assert naive.experimental_optimization.apply_default_optimizations is False
    assert naive.autotune.enabled is False

    def kinds(dataset: Any) -> list[str]:
        return [type(dataset).__name__] + [k for d in dataset._inputs() for k in kinds(d)]

    tuned = kinds(pipelines["tuned"])
    assert "_ParallelMapDataset" in tuned and "_PrefetchDataset" in tuned
    assert not any("Cache" in k for k in tuned), tuned  # the timed arm runs map every time


def test_input_pipeline_arms_all_end_in_the_same_copy_to_the_device() -> None:
    """Review 2 N4: the old ceiling read tensors already on the device, so only the tuned arm
    paid the host-to-device copy, and serially; every arm now ends in prefetch_to_device."""
    import numpy as np
    import tensorflow as tf

    from validation.workloads.input_pipeline import QUICK, _ceiling, _pipelines

    images = np.zeros((64, QUICK["image"], QUICK["image"], 3), np.uint8)
    pipelines = _pipelines(tf, images, np.zeros(64, np.int32), QUICK, 2, "/device:CPU:0")
    ceiling = _ceiling(tf, pipelines["tuned"], 2, "/device:CPU:0")
    for name, dataset in (*pipelines.items(), ("ceiling", ceiling)):
        while type(dataset).__name__ == "_OptionsDataset":  # the naive arm's options
            (dataset,) = dataset._inputs()
        (source,) = dataset._inputs()  # prefetch_to_device: a copy, then a prefetch after it
        assert type(source).__name__ == "_CopyToDeviceDataset", (name, type(source).__name__)
    (x_tuned, _), (x_ceiling, _) = next(iter(pipelines["tuned"])), next(iter(ceiling))
    assert np.array_equal(x_tuned.numpy(), x_ceiling.numpy())  # the ceiling holds the same data


def test_input_pipeline_speed_verdict_can_fail(tmp_path: Path) -> None:
    """Judged on CPU timings (the sandbox switch): no pipeline is 50x faster on 2 cores."""
    overrides = {
        "speed_verdicts_without_gpu": 1,
        "input_pipeline_tuned_speedup_min": 50,
        "input_pipeline_min_cores": 1,
    }
    status, doc, _, _ = run_workload(
        "input_pipeline", "--thresholds", json.dumps(overrides), tmp=tmp_path
    )
    assert status == 0
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["tuned_faster_than_naive"]["status"] == "fail", checks
    assert doc["metrics"]["tuned_speedup_vs_naive"] < 50
    assert doc["verdict"]["status"] == "fail"
