"""Reference-step logic that needs no TensorFlow: batches, sizes, training and speed verdicts."""

from __future__ import annotations

import argparse

import pytest

from gpufleet.floors.derived import floors_for
from validation.workloads._common import Run
from validation.workloads._refsteps import (
    BERT_CPU,
    BERT_LARGE,
    batch_per_gpu,
    bert_parameters,
    float_precision,
)
from validation.workloads._throughput import judge_throughput, precisions, training_verdict

A100 = "NVIDIA A100-SXM4-40GB"
V100 = "Tesla V100-SXM2-16GB"


def _run(model: str | None, capability: tuple[int, int] | None, quick: bool = False) -> Run:
    run = Run(workload="resnet50", args=argparse.Namespace(quick=quick, seed=0))
    run.cpus = ["/device:CPU:0"]
    if model:
        run.gpus, run.gpu_model, run.compute_capability = ["/device:GPU:0"], model, capability
        run.floors = {f.name: f for f in floors_for(model, 1, "single_gpu")}
    return run


def test_float_precision_is_tf32_from_ampere() -> None:
    assert float_precision((7, 0)) == "fp32"
    assert float_precision((8, 0)) == "tf32"
    assert float_precision(None) == "fp32"


def test_batch_is_dles_where_published_else_the_default() -> None:
    assert batch_per_gpu("resnet50", "tf32", A100) == 256  # DLE's DGX A100 row
    assert batch_per_gpu("resnet50", "fp32", V100) == 128
    assert batch_per_gpu("resnet50", "amp", "NVIDIA L4") == 256  # nothing published: default
    assert batch_per_gpu("bert_large", "amp", "NVIDIA A100-SXM4-80GB") == 312
    assert batch_per_gpu("bert_large", "bf16", None) == batch_per_gpu("bert_large", "amp", None)


def test_bert_large_shape_has_bert_larges_parameter_count() -> None:
    # BERT-Large: 340 M parameters with 512 positions, a pooler and the output tied to the
    # token embeddings; this encoder has 128 positions, no pooler and an untied output layer.
    untied_output = BERT_LARGE["vocab"] * BERT_LARGE["hidden"] + BERT_LARGE["vocab"]
    pooler_and_positions = 1024 * 1024 + 1024 + (512 - 128) * 1024
    encoder = bert_parameters(BERT_LARGE) - untied_output + pooler_and_positions
    assert encoder == pytest.approx(340e6, rel=0.02)
    assert bert_parameters(BERT_CPU) == 52128  # what Keras counts for the tiny model


def test_training_verdict_needs_finite_falling_losses() -> None:
    assert training_verdict([2.3, 0.4], "amp").status == "pass"
    assert training_verdict([2.3, 2.4], "amp").status == "fail"
    assert training_verdict([2.3, float("nan")], "amp").status == "fail"


def test_quick_gpu_tier_measures_amp_only() -> None:
    assert precisions(_run(A100, (8, 0), quick=True)) == ["amp"]
    assert precisions(_run(A100, (8, 0))) == ["tf32", "amp"]
    assert precisions(_run(V100, (7, 0))) == ["fp32", "amp"]
    assert precisions(_run(None, None, quick=True)) == ["fp32", "amp"]  # CPU: both, tiny


@pytest.mark.parametrize(
    ("per_gpu", "status"),
    [
        ([2300.0, 2310.0, 2290.0, 2305.0], "pass"),  # a healthy A100 (DLE: 2375)
        ([1180.0, 1190.0, 1175.0, 1185.0], "fail"),  # half clocks
    ],
)
def test_throughput_is_judged_against_the_published_floor(
    per_gpu: list[float], status: str
) -> None:
    run = _run(A100, (8, 0))
    judge_throughput(run, "resnet50", "amp", per_gpu)
    (check,) = run.checks
    assert check["status"] == status, check
    assert run.config["floors"]["resnet50.images_per_s.amp"]["value"] == 1900.0
    assert run.metrics["resnet50.images_per_s.amp"] == pytest.approx(per_gpu[0], rel=0.02)


def test_throughput_without_a_floor_is_reported_not_judged() -> None:
    run = _run("NVIDIA L4", (8, 9))
    judge_throughput(run, "resnet50", "amp", [900.0, 905.0, 910.0])
    (check,) = run.checks
    assert check["status"] == "not_applicable"
    assert "no published figure" in check["reason"]
    assert run.metrics["resnet50.images_per_s.amp"] == pytest.approx(905.0, rel=0.01)


def test_throughput_on_cpu_is_not_applicable_no_gpu() -> None:
    run = _run(None, None)
    judge_throughput(run, "resnet50", "fp32", [30.0, 31.0, 29.0])
    assert run.checks[0]["status"] == "not_applicable"
    assert run.checks[0]["reason"] == "no GPU"


def test_report_reads_reference_figures_with_the_recorded_floor() -> None:
    from gpufleet.report.figures import workload_figures

    doc = {
        "workload": "resnet50",
        "metrics": {"resnet50.images_per_s.amp": 1800.0, "resnet50.images_per_s.amp_ci": [1, 2]},
        "config": {"floors": {"resnet50.images_per_s.amp": {"value": 1900.0, "origin": "x"}}},
        "checks": [{"name": "throughput_amp", "status": "fail"}],
    }
    (figure,) = workload_figures(doc)
    assert (figure.kind, figure.variant, figure.threshold) == ("images_per_s", "amp", 1900.0)
    assert figure.meets_threshold is False and figure.status == "fail"
    assert figure.unit == "images/s"


def test_grad_accumulation_peak_memory_verdict() -> None:
    from validation.workloads.grad_accumulation import peak_verdict

    assert peak_verdict(400.0, 120.0, 0.6).status == "pass"
    assert peak_verdict(400.0, 390.0, 0.6).status == "fail"  # accumulating saved nothing
    assert peak_verdict(0.0, 10.0, 0.6).status == "fail"


def test_memory_growth_second_share() -> None:
    from validation.workloads.memory_growth import share_mib

    assert share_mib(81920.0, 0.4) == 32768
    with pytest.raises(ValueError, match="between 0 and 1"):
        share_mib(81920.0, 1.5)
