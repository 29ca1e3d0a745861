"""The version matrix against PyPI: the pip constraints files, and each TF release's row
against its wheel's recorded metadata (matrix_data/tf_and_cuda_metadata.txt)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufleet.matrix import TF_RELEASES, MatrixError, constraints_file


def test_constraints_file_2_18_0():
    text = constraints_file("2.18.0")
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(pins) == 12
    assert "nvidia-cudnn-cu12==9.3.0.75" in pins
    assert "nvidia-nccl-cu12==2.21.5" in pins
    assert "nvidia-cublas-cu12==12.5.3.2" in pins
    assert pins == sorted(pins)


def test_constraints_file_2_21_0():
    text = constraints_file("2.21.0")
    assert "nvidia-nccl-cu12==2.27.7\n" in text
    assert "nvidia-cuda-nvcc-cu12==12.5.82\n" in text
    assert text.startswith("# gpufleet")


def test_constraints_file_unknown():
    with pytest.raises(MatrixError, match=r"known: 2\.15\.1"):
        constraints_file("1.15.0")


# --- the TF table against the real wheel metadata ----------------------------------------

METADATA = Path(__file__).parent / "matrix_data" / "tf_and_cuda_metadata.txt"


def _recorded_metadata() -> dict[str, dict]:
    """Sections of tf_and_cuda_metadata.txt: version -> python min, cp tags, requirements."""
    sections: dict[str, dict] = {}
    current: dict = {}
    for line in METADATA.read_text().splitlines():
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {"requires": {}})
        elif line.startswith("Requires-Python: >="):
            current["python_min"] = line.split(">=")[1]
        elif line.startswith("cp tags: "):
            current["cp"] = line.split(": ")[1].split()
        elif line.startswith("Requires-Dist: "):
            spec = line.split(": ", 1)[1].split(";")[0].replace(" ", "").replace("(", "")
            name = re.match(r"[a-z0-9-]+", spec).group(0)
            current["requires"][name] = spec[len(name) :].rstrip(")")
    return sections


def test_recorded_metadata_covers_every_release():
    assert set(_recorded_metadata()) == set(TF_RELEASES)


@pytest.mark.parametrize("version", TF_RELEASES)
def test_release_matches_wheel_metadata(version):
    recorded = _recorded_metadata()[version]
    release = TF_RELEASES[version]
    assert release.python_min == recorded["python_min"]
    newest_cp = max(recorded["cp"], key=int)
    assert release.python_max == f"{newest_cp[0]}.{newest_cp[1:]}"
    assert set(release.wheels) == set(recorded["requires"])
    for name, spec in recorded["requires"].items():
        if spec.startswith("=="):
            assert release.wheels[name] == spec[2:], name
            assert name not in release.wheel_ranges
        else:  # "<13.0,>=12.5.3.2": pin the lower bound, keep the upper one
            upper, lower = spec.split(",")
            assert release.wheels[name] == lower.removeprefix(">="), name
            assert release.wheel_ranges[name] == upper, name
