"""One GPU lookup for `matrix`, `thresholds` and calibration files: ids, names, parts of names."""

from __future__ import annotations

import pytest

from gpufleet.commands.matrix import main as matrix
from gpufleet.commands.thresholds import main as thresholds
from gpufleet.matrix.gpu_lookup import GpuLookupError, find_gpu, lookup


def ids(text: str, nvswitch: bool = False) -> list[str]:
    return [m.device_id for m in lookup(text, nvswitch=nvswitch)]


def test_ids_names_and_words_find_the_models() -> None:
    assert ids("2330") == ids("0x2330") == ids("10de:2330") == ["2330"]
    assert ids("nvidia h100 nvl") == ids("H100 NVL") == ["2321"]
    assert ids("A100") == ["20b0", "20f1", "20b2", "20b5"]  # never A10, A10G or A30
    assert ids("A10") == ["2236"]
    assert ids("A100-SXM4-80GB") == ["20b2"]
    assert ids("H100") == ["2330", "2331", "2321"]  # not the H100 boards' NVSwitch
    assert ids("NVSwitch", nvswitch=True) == ["1af1", "22a3"]
    assert ids("zzzz") == ids("") == []


def test_find_gpu_needs_exactly_one() -> None:
    assert find_gpu("NVIDIA A100-SXM4-80GB").device_id == "20b2"
    with pytest.raises(GpuLookupError, match="'A100' matches 4 models: 'NVIDIA A100-SXM4-40GB'"):
        find_gpu("A100")
    with pytest.raises(GpuLookupError, match=r"Did you mean 'NVIDIA H100 [^']*', 'NVIDIA H100"):
        find_gpu("H100 SXM")


def test_matrix_gpu_takes_names_and_refuses_unknown_ids(capsys: pytest.CaptureFixture) -> None:
    # review §3 items 17-18: "--gpu H100" said "(none given)" with exit 0, and
    # "--gpu 2330,zzzz" dropped zzzz without a word
    assert matrix(["--gpu", "H100 NVL"]) == 0
    out = capsys.readouterr().out
    assert "GPUs           NVIDIA H100 NVL" in out and "(none given)" not in out
    assert matrix(["--gpu", "H100"]) == 0
    captured = capsys.readouterr()
    assert "note: --gpu H100 is 3 models" in captured.err and "NVSwitch" not in captured.out
    assert matrix(["--gpu", "2330,zzzz"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--gpu zzzz: unknown GPU model 'zzzz'" in captured.err
    assert "NVIDIA H100 80GB HBM3 (2330)" in captured.err  # the known list


def test_thresholds_suggests_the_models_of_that_name(capsys: pytest.CaptureFixture) -> None:
    # review §3 item 19: "A100" suggested A10, H100 NVL and H200, and no A100
    args = ["--gpu-count", "8", "--interconnect", "nvswitch"]
    assert thresholds(["--gpu-model", "A100", *args]) == 2
    err = capsys.readouterr().err
    assert "'NVIDIA A100-SXM4-80GB' (20b2)" in err
    assert "A10'" not in err and "H200" not in err and "H100 NVL" not in err
    assert thresholds(["--gpu-model", "A100-SXM4-80GB", *args]) == 0


def test_matrix_warnings_come_first() -> None:
    from gpufleet.matrix.show import _render

    class Fake:
        def __getattr__(self, name: str) -> object:
            return {"warnings": ["mind this"], "gpu_names": [], "wheel_constraints": {}}.get(
                name, ""
            )

    assert _render(Fake()).splitlines()[0] == "warning: mind this"  # type: ignore[arg-type]
