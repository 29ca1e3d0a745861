"""Issue 32 item 5 / review 2 N7: the batch per GPU follows its memory; floors hold at theirs."""

from __future__ import annotations

import argparse

import pytest

from gpufleet.floors.derived import floors_for
from validation.workloads._batch import (
    ACTIVATION_MIB,
    BERT_XLA_FIT,
    STATE_MIB,
    USABLE,
    batch_for,
    figure_mismatch,
    fitting_batch,
    gpu_memory_mib,
    needed_mib,
)
from validation.workloads._refsteps import BERT_LARGE, bert_parameters
from validation.workloads._run import Run
from validation.workloads._throughput import judge_throughput
from validation.workloads.mixed_precision import arms

V100 = "Tesla V100-SXM2-16GB"
A100 = "NVIDIA A100-SXM4-80GB"
V100_MIB = 16160.0  # what NVML reports for a 16 GB V100
T4_MIB = 15360.0


def _run(model: str, memory: float | None) -> Run:
    run = Run(workload="resnet50", args=argparse.Namespace(quick=False, seed=0))
    run.gpus, run.gpu_model, run.compute_capability = ["/device:GPU:0"], model, (7, 0)
    run.devices = [{"type": "GPU", "name": "/device:GPU:0", "memory_mib": memory}]
    run.floors = {f.name: f for f in floors_for(model, 1, "single_gpu")}
    return run


def test_the_review_s_xla_off_amp_step_at_256_does_not_fit_16_gb() -> None:
    need = needed_mib("resnet50", "amp", 256, xla=False)
    assert need is not None and need > USABLE * V100_MIB


@pytest.mark.parametrize("memory", [V100_MIB, T4_MIB])
def test_xla_off_amp_on_16_gb_parts_halves_the_batch(memory: float) -> None:
    # The old code ran 256 whatever the memory: an OOM, so a crash, so FAIL (N7).
    assert fitting_batch("resnet50", "amp", 256, memory, xla=False) == 128
    assert fitting_batch("resnet50", "bf16", 256, memory, xla=False) == 128


def test_the_figure_s_batch_is_kept_where_it_fits() -> None:
    assert fitting_batch("resnet50", "amp", 256, V100_MIB, xla=True) == 256  # DLE's own run
    assert fitting_batch("resnet50", "fp32", 128, V100_MIB, xla=False) == 128
    assert fitting_batch("resnet50", "amp", 256, 81920.0, xla=False) == 256
    assert fitting_batch("resnet50", "tf32", 256, 40960.0, xla=False) == 256


def test_unknown_memory_or_model_keeps_the_preferred_batch() -> None:
    assert fitting_batch("resnet50", "amp", 256, None, xla=False) == 256
    assert fitting_batch("resnet50", "amp", 256, 0.0, xla=False) == 256


@pytest.mark.parametrize("memory", [V100_MIB, T4_MIB])
def test_bert_large_on_16_gb_parts_halves_its_batch(memory: float) -> None:
    # Review 2 §2.1: "AMP 48 at 16 GB: OOM risk". The old code had no BERT estimate and kept
    # 48 AMP / 24 float on every GPU.
    assert fitting_batch("bert_large", "amp", 48, memory, xla=True) == 24
    assert fitting_batch("bert_large", "fp32", 24, memory, xla=True) == 12
    assert fitting_batch("bert_large", "amp", 48, 23034.0, xla=True) == 48  # an L4 keeps it


@pytest.mark.parametrize(
    ("model", "memory", "precision", "batch"),
    [
        (A100, 81920.0, "amp", 312),  # DLE's BERT rows, each at its own batch, with XLA
        (A100, 81920.0, "tf32", 176),
        ("Tesla V100-SXM2-32GB", 32510.0, "amp", 60),
        ("Tesla V100-SXM2-32GB", 32510.0, "fp32", 32),
    ],
)
def test_dle_s_own_bert_runs_fit_so_their_floors_apply(
    model: str, memory: float, precision: str, batch: int
) -> None:
    assert fitting_batch("bert_large", precision, batch, memory, xla=True) == batch
    assert figure_mismatch(model, "bert_large", precision, batch) is None


def test_the_bert_estimate_holds_the_traced_state_and_xla_no_more_than_the_trace() -> None:
    for kind in ("fp32", "amp"):
        assert (
            ACTIVATION_MIB[("bert_large", kind, True)]
            <= ACTIVATION_MIB[("bert_large", kind, False)]
        )
        memory, batch = BERT_XLA_FIT[kind]
        need = needed_mib("bert_large", kind, batch, xla=True)
        assert need is not None and need <= USABLE * memory
    # weights, gradients and LAMB's two slots of the 366 M parameters the model builds
    assert STATE_MIB["bert_large"] == pytest.approx(4 * 4 * bert_parameters(BERT_LARGE) / 2**20)
    assert 5500 < STATE_MIB["bert_large"] < 5700


def test_a_tiny_gpu_stops_at_the_smallest_batch() -> None:
    assert fitting_batch("resnet50", "amp", 256, 1024.0, xla=False) == 8


def test_memory_comes_from_nvml_else_the_datasheet() -> None:
    assert gpu_memory_mib(_run(V100, V100_MIB)) == V100_MIB
    assert gpu_memory_mib(_run(V100, None)) == 16 * 1024.0
    run = _run(V100, V100_MIB)
    run.devices.append({"type": "GPU", "name": "/device:GPU:1", "memory_mib": 8000})
    assert gpu_memory_mib(run) == 8000.0  # the smallest GPU the run trains on


def test_batch_for_records_why_memory_made_it_smaller() -> None:
    run = _run(V100, V100_MIB)
    assert batch_for(run, "resnet50", "amp", xla=False) == 128
    entry = run.config["batch_by_memory"]["resnet50.amp.xla=False"]
    assert entry["preferred"] == 256 and entry["batch"] == 128
    assert batch_for(run, "resnet50", "amp", xla=True) == 256


def test_a_published_floor_is_not_applied_at_another_batch() -> None:
    assert figure_mismatch(V100, "resnet50", "amp", 256) is None
    why = figure_mismatch(V100, "resnet50", "amp", 128)
    assert why is not None and "256/GPU" in why and "128/GPU" in why
    assert figure_mismatch("NVIDIA L4", "resnet50", "amp", 128) is None  # nothing published


def test_throughput_at_a_smaller_batch_is_reported_not_failed() -> None:
    slow = [600.0, 601.0, 602.0]  # far under V100's AMP floor: fails at the figure's batch
    judged = _run(V100, V100_MIB)
    judge_throughput(judged, "resnet50", "amp", slow, batch=256)
    assert judged.checks[0]["status"] == "fail"
    reported = _run(V100, V100_MIB)
    judge_throughput(reported, "resnet50", "amp", slow, batch=128)
    assert reported.checks[0]["status"] == "not_applicable"
    assert "not the published figure's 256/GPU" in reported.checks[0]["reason"]
    assert reported.metrics["resnet50.images_per_s.amp"] == pytest.approx(601.0, rel=0.01)


def test_mixed_precision_arms_fit_the_memory_they_are_given() -> None:
    full = arms("fp32", "amp", has_gpu=True, gpu_model=V100, batch=None, steps=5)
    small = arms("fp32", "amp", has_gpu=True, gpu_model=V100, batch=None, steps=5, memory_mib=10240)
    assert [a["batch"] for a in full] == [128, 256]
    assert [a["batch"] for a in small] == [64, 128]
    assert small[0]["steps"] * 64 == small[1]["steps"] * 128  # still the same images per block
