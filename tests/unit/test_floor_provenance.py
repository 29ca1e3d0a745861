"""Issue 32 acceptance: `gpufleet thresholds` gives each floor its figure, configuration, source."""

from __future__ import annotations

import pytest

from gpufleet.cli import main as cli_main
from gpufleet.floors.derived import floors_for
from tests.unit import truth_table as tt

NAMES = sorted(tt.CLASSES)
TRAINING = ("resnet50.", "bert_large.", "mixed_precision.", "mirrored.scaling_efficiency")


def _floors(name: str):
    kind = tt.CLASSES[name]
    return floors_for(kind.model, kind.count, kind.interconnect)


def _rests_on_a_figure(floor) -> bool:
    """Published, or derived from a published floor (gemm.tflops from its fraction)."""
    return floor.origin.startswith("published") or (
        floor.name.startswith("gemm.tflops.") and "fraction_of_peak" in floor.origin
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_floor_resting_on_a_figure_names_it_its_configuration_and_source(name: str) -> None:
    # Old code: gemm.tflops.* (a published fraction in TFLOP/s) and the datasheet's PCIe
    # floors printed "figure: (none ...)" and "source: gpufleet's choice".
    for floor in _floors(name):
        if floor.value is None or not _rests_on_a_figure(floor):
            continue
        if floor.name.startswith("gemm.tflops.") and "published" not in floor.origin:
            fraction = next(f for f in _floors(name) if f.name in floor.origin)
            if not fraction.origin.startswith("published"):
                continue  # the fraction is gpufleet's choice: nothing published to show
        assert floor.figure and floor.config and floor.source, f"{name}: {floor.name}"


@pytest.mark.parametrize("name", NAMES)
def test_a_training_figure_s_configuration_states_xla_precision_and_batch(name: str) -> None:
    # Old code: BERT's rows read "XLA not stated by the table"; DLE's script turns XLA on.
    for floor in _floors(name):
        if floor.value is None or not floor.name.startswith(TRAINING) or not floor.config:
            continue
        config = floor.config
        assert "XLA on" in config, f"{name}: {floor.name}: {config}"
        assert "batch" in config, f"{name}: {floor.name}: {config}"
        assert any(p in config for p in ("FP32", "TF32", "AMP", "each arm")), config
    for floor in _floors(name):
        assert "not stated" not in floor.config, f"{name}: {floor.name}: {floor.config}"


def test_non_training_figures_say_xla_does_not_apply() -> None:
    floors = {f.name: f for f in _floors("8xA100")}
    assert "XLA n/a" in floors["gemm.fraction_of_peak.fp16"].config
    assert "XLA n/a" in floors["allreduce.busbw_gbps"].config
    assert "BUSBW_GBPS" not in floors["allreduce.busbw_gbps"].config


def test_the_scaling_floor_names_the_precision_and_batch_of_its_row() -> None:
    floor = {f.name: f for f in _floors("8xV100")}["mirrored.scaling_efficiency"]
    assert "AMP" in floor.config and "batch 256/GPU" in floor.config


def test_thresholds_prints_the_derived_tflops_floor_with_the_fraction_s_source(capsys) -> None:
    args = ["thresholds", "--gpu-model", tt.CLASSES["8xA100"].model, "--gpu-count", "8"]
    assert cli_main([*args, "--interconnect", "nvswitch"]) == 0
    out = capsys.readouterr().out
    block = out.split("gemm.tflops.fp16", 1)[1].split("\ngemm.", 1)[0]
    assert "figure: 0.8587 fraction (267.9 of 312.0 TFLOP/s" in block
    assert "source: stas00/ml-engineering" in block
    link = out.split("pcie.link_gen", 1)[1]
    assert "figure: PCIe Gen4 x16" in link and "source: NVIDIA A100" in link
