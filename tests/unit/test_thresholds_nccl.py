"""Issue 32 (N8): `gpufleet thresholds` shows the nccl-tests floor a kind of host faces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.commands.thresholds import main as thresholds
from gpufleet.floors.nccl import find_floor
from gpufleet.floors.show import NCCL_FIGURE, nccl_floors

A100 = "NVIDIA A100-SXM4-80GB"


def test_an_8_gpu_nvswitch_board_faces_nccl_py_s_nvlink_floor_with_its_source() -> None:
    (floor,) = nccl_floors(A100, 8, "nvswitch")
    table = find_floor(A100, 8, "nvlink")
    assert table is not None
    assert (floor.name, floor.value, floor.unit) == (NCCL_FIGURE, table.busbw_gbps, "GB/s")
    assert floor.source == table.source and "nccl-tests#149" in floor.source
    assert floor.figure == "all_reduce_perf bus bandwidth at the largest message size"
    assert floor.config == "nccl-tests all_reduce_perf, 8 GPUs (nvlink), sizes up to 8 GiB"


def test_an_advisory_floor_says_so() -> None:
    (floor,) = nccl_floors("NVIDIA H100 80GB HBM3", 16, "nvlink+efa")
    assert floor.origin.startswith("published, advisory")
    assert "best of any size" in floor.figure and "128 MiB" in floor.config


def test_thresholds_prints_the_nccl_floor_or_says_there_is_none(
    capsys: pytest.CaptureFixture,
) -> None:
    assert thresholds(["--gpu-model", A100, "--gpu-count", "8", "--interconnect", "nvswitch"]) == 0
    out = capsys.readouterr().out
    assert "nccl-tests floor (gpufleet/floors/nccl.py" in out
    assert f"{NCCL_FIGURE}" in out and "source: 0.9 x NVIDIA/nccl-tests#149" in out
    argv = ["--gpu-model", "NVIDIA L4", "--gpu-count", "1", "--interconnect", "single_gpu"]
    assert thresholds(argv) == 0
    assert "(none for this kind of host: the bus bandwidth is reported, not judged)" in (
        capsys.readouterr().out
    )


def test_thresholds_limit_json_carries_the_nccl_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("gpus = (['gpu-a'], {'gpu_count': 8})\n")
    argv = [str(inv), "--limit", "gpu-a", "--gpu-model", A100, "--interconnect", "nvswitch"]
    assert thresholds([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (floor,) = shown["nccl_tests_floors"]
    assert floor["name"] == NCCL_FIGURE and floor["value"] == 180.0
    assert floor["source"].startswith("0.9 x NVIDIA/nccl-tests#149")
