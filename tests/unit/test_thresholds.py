"""Threshold layering (defaults < compute capability < GPU model < overrides) and its errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from validation.verdicts.thresholds import (
    DEFAULT_PATH,
    ThresholdsError,
    load_thresholds,
    load_thresholds_with_sources,
    parse_compute_capability,
    read_table,
)


def test_no_gpu_gets_the_defaults() -> None:
    values = load_thresholds(None, None)
    assert values == {k: float(v) for k, v in read_table()["defaults"].items()}
    assert values["mixed_precision_fp16_speedup_min"] == 0.0  # no tensor cores assumed


def test_compute_capability_tiers_accumulate_upwards() -> None:
    pascal = load_thresholds((6, 1), None)
    volta = load_thresholds("7.0", None)
    turing = load_thresholds("7.5", None)
    ampere = load_thresholds((8, 6), None)
    assert pascal["mixed_precision_fp16_speedup_min"] == 0.0
    assert volta["mixed_precision_fp16_speedup_min"] == 2.0
    assert volta["mixed_precision_bf16_speedup_min"] == 0.0  # bf16 tensor cores from 8.0
    assert turing == volta
    assert ampere["mixed_precision_fp16_speedup_min"] == 1.3
    assert ampere["mixed_precision_bf16_speedup_min"] == 1.3
    assert ampere["grad_accumulation_rtol"] > volta["grad_accumulation_rtol"]  # TF32


def test_gpu_model_and_override_layers_and_their_sources() -> None:
    values, sources = load_thresholds_with_sources(
        "9.0", "nvidia h100 80gb hbm3", {"xla_speedup_min": 1.2}
    )
    assert values["allreduce_busbw_min_gbps"] == 414.0
    assert sources["allreduce_busbw_min_gbps"] == "gpu_model NVIDIA H100 80GB HBM3"
    assert values["xla_speedup_min"] == 1.2
    assert sources["xla_speedup_min"] == "inventory override"
    assert sources["mixed_precision_bf16_speedup_min"] == "compute_capability 8.0"
    assert sources["mirrored_scaling_efficiency_min"] == "defaults"


def test_unknown_gpu_model_falls_back_to_compute_capability() -> None:
    assert load_thresholds("8.9", "NVIDIA L4")["allreduce_busbw_min_gbps"] == 0.0


def test_unknown_override_key_names_the_closest_key() -> None:
    with pytest.raises(ThresholdsError, match="did you mean 'xla_speedup_min'"):
        load_thresholds("8.0", None, {"xla_speedup_mn": 1.2})


@pytest.mark.parametrize("value", ["1.2", True, None, [1]])
def test_override_must_be_a_number(value: object) -> None:
    with pytest.raises(ThresholdsError, match="must be a number"):
        load_thresholds("8.0", None, {"xla_speedup_min": value})


def test_negative_override_is_refused() -> None:
    with pytest.raises(ThresholdsError, match=">= 0"):
        load_thresholds(None, None, {"xla_speedup_min": -1})


@pytest.mark.parametrize("bad", ["eight", "8", "8.0.1", (8,)])
def test_bad_compute_capability(bad: object) -> None:
    with pytest.raises(ThresholdsError, match=r"MAJOR\.MINOR"):
        parse_compute_capability(bad)  # type: ignore[arg-type]


def test_a_tier_key_without_a_default_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[defaults]\na = 1.0\n[compute_capability."8.0"]\nb = 2.0\n')
    with pytest.raises(ThresholdsError, match=r"sets \['b'\]"):
        load_thresholds("8.0", None, path=path)


def test_invalid_toml_is_reported_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[defaults\n")
    with pytest.raises(ThresholdsError, match="not valid TOML"):
        load_thresholds(None, None, path=path)


def test_every_value_in_the_shipped_file_carries_a_source_comment() -> None:
    """Each key = value line is preceded by a comment (its source), as the file promises."""
    lines = DEFAULT_PATH.read_text().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^[a-z0-9_]+\s*=", line):
            above = lines[:index]
            previous = next((p for p in reversed(above) if not re.match(r"^[a-z0-9_]+\s*=", p)), "")
            assert previous.startswith("#"), f"no source comment above: {line}"


def test_topology_class_sits_between_compute_capability_and_gpu_model() -> None:
    values, sources = load_thresholds_with_sources("8.0", None, topology="nvlink", gpu_count=8)
    assert (values["allreduce_busbw_min_gbps"], sources["allreduce_busbw_min_gbps"]) == (
        205.0,
        "allreduce_topology nvlink, 8 GPUs",
    )
    four = load_thresholds_with_sources("8.0", None, topology="nvlink", gpu_count=4)
    assert four[1]["allreduce_busbw_min_gbps"] == "allreduce_topology nvlink"
    assert (
        load_thresholds("9.0", "NVIDIA H100 80GB HBM3", topology="pcie_switch")[
            "allreduce_busbw_min_gbps"
        ]
        == 414.0
    )
    override = {"allreduce_busbw_min_gbps": 1.0}
    assert (
        load_thresholds("8.6", None, override, topology="pcie_switch")["allreduce_busbw_min_gbps"]
        == 1.0
    )
    # Classes without a section keep the layers below; only the all-reduce floor moves.
    assert load_thresholds("8.0", None, topology="single_gpu") == load_thresholds("8.0", None)
    with_class = load_thresholds("8.0", None, topology="cross_socket")
    assert with_class.pop("allreduce_busbw_min_gbps") == 3.0
    assert with_class == {
        k: v for k, v in load_thresholds("8.0", None).items() if k != "allreduce_busbw_min_gbps"
    }


def test_every_shipped_topology_floor_is_ordered_by_link_speed() -> None:
    def floor(topology: str) -> float:
        return load_thresholds(None, None, topology=topology)["allreduce_busbw_min_gbps"]

    assert floor("nvlink") >= floor("pcie_switch") >= floor("pcie_host_bridge")
    assert floor("pcie_host_bridge") >= floor("cross_socket") > 0
    assert floor("no_gpu") == floor("unknown") == 0.0


def test_unknown_topology_class_is_refused() -> None:
    with pytest.raises(ThresholdsError, match="unknown GPU topology class 'nvswich'"):
        load_thresholds(None, None, topology="nvswich")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("[allreduce_topology.nvswitch]\nallreduce_busbw_min_gbps = 1.0\n", "did you mean"),
        ("[allreduce_topology.nvlink]\nxla_speedup_min = 1.0\n", r"sets \['xla_speedup_min'\]"),
        ("[allreduce_topology.nvlink]\nby_gpu_count = { eight = 1.0 }\n", "not a GPU count"),
        ("[allreduce_topology.nvlink]\nby_gpu_count = { 1 = 1.0 }\n", "not a GPU count"),
        ("[allreduce_topology.nvlink]\nallreduce_busbw_min_gbps = -1\n", "GB/s >= 0"),
        ("[allreduce_topology.nvlink]\nby_gpu_count = { 8 = 'fast' }\n", "GB/s >= 0"),
    ],
)
def test_bad_topology_sections_are_refused(tmp_path: Path, section: str, message: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(f"[defaults]\nallreduce_busbw_min_gbps = 0.0\n{section}")
    with pytest.raises(ThresholdsError, match=message):
        load_thresholds(None, None, path=path)


def test_every_unknown_override_is_named_at_once() -> None:
    # review §3 item 6: of two unknown names only the first was reported
    # (xla.speedup.amp, the review's example, is a figure's dotted name since issue 33)
    overrides = {"xla.speedup.amq": 1.1, "xla_speedup_mni": 1.2}
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(None, None, overrides)
    message = str(info.value)
    assert "unknown thresholds 'xla.speedup.amq' (did you mean 'xla.speedup.amp'?)" in message
    assert "'xla_speedup_mni' (did you mean 'xla_speedup_min'?)" in message
