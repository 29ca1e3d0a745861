"""`gpufleet thresholds INVENTORY --limit HOST`: one host's floors from its data, with sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.commands.thresholds import main as thresholds

A100 = "NVIDIA A100-SXM4-80GB"


def inventory(tmp_path: Path, data: str) -> str:
    path = tmp_path / "inv.py"
    path.write_text(f'gpus = (["gpu-a", "gpu-b"], {data})\n')
    return str(path)


def test_a_host_gets_its_calibration_and_its_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cal = tmp_path / "a100.toml"
    cal.write_text(
        f'schema = 1\ngpu_model = "{A100}"\ngpu_count = 8\ninterconnect = "nvswitch"\n'
        '[figures."mirrored.scaling_efficiency"]\nvalues = [0.9, 0.91]\n'
    )
    data = (
        f'{{"gpu_count": 8, "calibration_file": "{cal}", "thresholds": {{"xla_speedup_min": 1.2}}}}'
    )
    assert thresholds([inventory(tmp_path, data), "--limit", "gpu-a", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["host"] == "gpu-a" and shown["calibration_file"] == str(cal)
    assert shown["kind"] == {"gpu_model": A100, "gpu_count": 8, "interconnect": "nvswitch"}
    assert shown["sources"]["gpu_model"] == f"calibration file {cal}"
    assert shown["sources"]["gpu_count"] == "the inventory's gpu_count"
    floors = {f["name"]: f for f in shown["floors"]}
    assert floors["mirrored.scaling_efficiency"]["origin"].startswith("calibration")
    suite = {t["name"]: t for t in shown["thresholds"]}
    assert suite["xla_speedup_min"] == {
        "name": "xla_speedup_min",
        "value": 1.2,
        "source": "inventory override",
    }


def test_what_the_data_does_not_say_is_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    inv = inventory(tmp_path, '{"gpu_count": 8}')
    assert thresholds([inv, "--limit", "gpu-a"]) == 2
    assert "does not say its gpu-model, interconnect. Fix: give" in capsys.readouterr().err
    args = [inv, "--limit", "gpu-a", "--gpu-model", "A100-SXM4-80GB", "--interconnect", "nvswitch"]
    assert thresholds(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"gpu-a: {A100} x8 (nvswitch); no calibration file")
    assert "validation thresholds (validation/verdicts/thresholds.toml" in out
    assert thresholds([inv]) == 2  # two hosts: name one
    assert "the floors are per host: name exactly one with --limit HOST" in capsys.readouterr().err


def test_bad_inventory_data_is_refused_with_its_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert thresholds([inventory(tmp_path, '{"gpu_cuont": 8}'), "--limit", "gpu-a"]) == 2
    assert "unknown inventory key 'gpu_cuont'. Did you mean 'gpu_count'?" in capsys.readouterr().err


def test_without_an_inventory_the_kind_is_required() -> None:
    with pytest.raises(SystemExit) as info:
        thresholds(["--gpu-model", A100])
    assert info.value.code == 2
