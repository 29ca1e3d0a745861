"""Speed-ups measured as their floors' figures were (review 2, N1): XLA both arms, DLE batches."""

from __future__ import annotations

import json

import pytest

from gpufleet.cli import main as cli_main
from gpufleet.floors.derived import floors_for
from validation.workloads.mixed_precision import arms

V100 = "Tesla V100-SXM2-16GB"
A100 = "NVIDIA A100-SXM4-80GB"


def _floors(model: str, count: int = 1, link: str = "single_gpu") -> dict:
    return {f.name: f for f in floors_for(model, count, link)}


def test_gpu_arms_are_xla_compiled_at_dles_batch_with_equal_images() -> None:
    # Old code: both arms XLA off at the float batch (review 2, N1: memory-bound unfused BN).
    fp32, amp = arms("fp32", "amp", has_gpu=True, gpu_model=V100, batch=None, steps=5)
    assert fp32 == {"batch": 128, "steps": 10, "jit_compile": True}
    assert amp == {"batch": 256, "steps": 5, "jit_compile": True}
    tf32, amp = arms("tf32", "amp", has_gpu=True, gpu_model=A100, batch=None, steps=5)
    assert tf32["batch"] * tf32["steps"] == amp["batch"] * amp["steps"] == 256 * 5
    assert tf32["jit_compile"] and amp["jit_compile"]


def test_cpu_arms_stay_small_and_uncompiled() -> None:
    a, b = arms("fp32", "amp", has_gpu=False, gpu_model=None, batch=4, steps=2)
    assert a == b == {"batch": 4, "steps": 2, "jit_compile": False}


@pytest.mark.parametrize(("model", "ratio"), [(V100, 1270 / 412), (A100, 2375 / 909)])
def test_published_pair_floor_names_its_figure_configuration_and_source(model, ratio) -> None:
    floor = _floors(model)["mixed_precision.speedup.fp16"]
    assert floor.value == round(ratio * 0.75, 2)
    assert "XLA on both" in floor.figure and "both arms XLA on" in floor.config
    assert floor.source.startswith("NVIDIA/DeepLearningExamples")


@pytest.mark.parametrize(
    "model", ["NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla T4", "NVIDIA L40S", A100]
)
def test_speed_ups_without_a_matching_published_pair_are_report_only(model) -> None:
    # Old code: 1.5 / 2.0 "choice" floors for fp16 and bf16 and 1.0 for XLA, none measured.
    floors = _floors(model)
    for name, floor in floors.items():
        if name.startswith("xla.speedup") or name == "mixed_precision.speedup.bf16":
            assert floor.value is None, name
    if model != A100:
        assert floors["mixed_precision.speedup.fp16"].value is None


def test_thresholds_prints_figure_configuration_and_source(capsys) -> None:
    args = ["thresholds", "--gpu-model", V100, "--gpu-count", "8"]
    assert cli_main([*args, "--interconnect", "nvlink_partial"]) == 0
    out = capsys.readouterr().out
    block = out.split("mixed_precision.speedup.fp16", 1)[1].split("\n\n")[0]
    assert "figure: AMP 1270 / FP32 412" in block
    assert "configuration: ResNet-50 v1.5 training, both arms XLA on" in block
    assert "source: NVIDIA/DeepLearningExamples" in block
    assert cli_main([*args, "--interconnect", "nvlink_partial", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["resnet50.images_per_s.amp"]["config"].startswith("ResNet-50 v1.5 training AMP")
    assert "batch 256/GPU" in rows["resnet50.images_per_s.amp"]["config"]
