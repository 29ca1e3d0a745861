"""`gpufleet thresholds --judge`: a document of another kind of host is said to be one, and a
hand-typed figure name gets a did-you-mean (review §3 row 23)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli import main as cli_main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "results" / "validate-local-quick.json"
A100 = ["--gpu-model", "NVIDIA A100-SXM4-80GB", "--gpu-count", "8", "--interconnect", "nvswitch"]


def thresholds(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = cli_main(["thresholds", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def gpu_document(model: str, count: int) -> dict[str, object]:
    devices = [{"type": "GPU", "name": f"/device:GPU:{i}", "model": model} for i in range(count)]
    metrics = {"speedup": 1.5}
    return {"workloads": [{"workload": "xla", "devices": devices, "metrics": metrics}]}


def test_a_cpu_run_judged_against_gpu_floors_is_warned(capsys) -> None:
    rc, out, err = thresholds(capsys, *A100, "--judge", str(FIXTURE))
    assert rc == 1 and "FAIL" in out
    assert err.startswith(f"warning: {FIXTURE} ran on no GPU (its workloads saw only CPU")
    assert "floors of 8x NVIDIA A100-SXM4-80GB" in err
    assert "--gpu-model cpu --gpu-count 0 --interconnect none --calibration FILE" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("model", "count", "ran"),
    [("NVIDIA H100 80GB HBM3", 8, "8x NVIDIA H100 80GB HBM3"), ("NVIDIA A100-SXM4-80GB", 4, "4x")],
)
def test_another_gpu_or_count_is_warned(tmp_path, capsys, model, count, ran) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(gpu_document(model, count)))
    _rc, _out, err = thresholds(capsys, *A100, "--judge", str(path))
    assert f"ran on {ran}" in err and "give the --gpu-model and --gpu-count it ran on" in err


def test_the_kind_asked_and_a_bare_figures_file_are_not_warned(tmp_path, capsys) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(gpu_document("NVIDIA A100-SXM4-80GB", 8)))
    assert "warning" not in thresholds(capsys, *A100, "--judge", str(path))[2]
    path.write_text(json.dumps({"xla.speedup.amp": 1.5}))
    assert "warning" not in thresholds(capsys, *A100, "--judge", str(path))[2]


def test_a_hand_typed_figure_name_gets_a_did_you_mean(tmp_path, capsys) -> None:
    path = tmp_path / "figures.json"
    path.write_text(json.dumps({"xla_speedup": 1.2, "xla.speedup.amp": 1.5}))
    _rc, out, _err = thresholds(capsys, *A100, "--judge", str(path))
    line = next(line for line in out.splitlines() if " xla_speedup " in line)
    assert "no floor for this figure; did you mean 'xla.speedup.amp'" in line


def test_odd_devices_fields_neither_warn_nor_break(tmp_path, capsys) -> None:
    path = tmp_path / "run.json"
    doc = {"workloads": [{"workload": "xla", "devices": None, "metrics": {"speedup": 1.5}}]}
    path.write_text(json.dumps(doc))
    rc, _out, err = thresholds(capsys, *A100, "--judge", str(path))
    assert rc == 2 and "warning" not in err and "Traceback" not in err  # 2: no floor judged
