"""The report says where each floor came from: calibration, a published figure or a choice."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from gpufleet.report.fleet import load_fleet
from gpufleet.report.html import render_html
from gpufleet.report.origins import floor_rows, origin_counts, origin_kind
from gpufleet.report.terminal import print_report
from tests.unit import fleet_factory as ff

FLOORS = {
    "resnet50.images_per_s.amp": {
        "value": 1893.2,
        "unit": "images/s",
        "bound": "min",
        "origin": "calibration (calibration/a100.toml: median 2103.5 of 3 runs on gpu01, ...)",
    },
    "mixed_precision.speedup.fp16": {
        "value": 1.96,
        "unit": "x",
        "bound": "min",
        "origin": "published (NVIDIA/DeepLearningExamples ...: AMP 2375 / TF32 909 = 2.61) x 0.75",
    },
    "xla.speedup.amp": {
        "value": 1.0,
        "unit": "x",
        "bound": "min",
        "origin": "gpufleet's choice: no slowdown",
    },
    "resnet50.images_per_s.tf32": {"value": None, "origin": "no published figure: reported"},
}


def _doc() -> dict:
    workload = ff.workload("resnet50", {"resnet50.images_per_s.amp": 2050.0}, {}, {})
    workload["config"]["floors"] = FLOORS
    return ff.checks_document(
        [{"name": "workloads::resnet50", "status": "pass", "message": "", "figures": {}}],
        host="gpu01",
        run_id="20261201T120000Z-abcdef",
        started_at="2026-12-01T12:00:00+00:00",
        tier="full",
        target="ssh://gpu01",
        workloads=[workload],
    )


@pytest.mark.parametrize(
    ("origin", "value", "kind"),
    [
        ("calibration (x.toml: median 3 of 3 runs)", 2.7, "calibration"),
        ("published (DLE RN50: 2375 images/s) x 0.8", 1900.0, "published"),
        ("gpufleet's choice (no measurement for this model)", 0.55, "choice"),
        ("gemm.fraction_of_peak.fp16 x dense peak 312", 200.0, "derived"),
        ("no published figure (...): reported; set by calibration", None, "none"),
    ],
)
def test_origin_kinds(origin, value, kind):
    assert origin_kind(origin, value) == kind


def test_each_floor_row_carries_its_figure_and_origin():
    rows = {r.name: r for r in floor_rows(_doc())}
    assert rows["resnet50.images_per_s.amp"].figure == 2050.0
    assert rows["resnet50.images_per_s.amp"].floor_text == ">= 1893.2 images/s"
    assert origin_counts(list(rows.values())) == {
        "calibration": 1,
        "published": 1,
        "choice": 1,
        "none": 1,
    }


def test_terminal_report_shows_the_floor_origins():
    buffer = io.StringIO()
    print_report([_doc()], console=Console(file=buffer, width=200))
    text = buffer.getvalue()
    assert "floors and their origins" in text
    line = next(x for x in text.splitlines() if "resnet50.images_per_s.amp" in x)
    assert "calibration" in line and "2.05e+03" in line and ">= 1893.2" in line
    line = next(x for x in text.splitlines() if "mixed_precision.speedup.fp16" in x)
    assert "published figure" in line


def test_html_report_shows_the_floor_origins(tmp_path):
    (tmp_path / "gpu01").mkdir()
    (tmp_path / "gpu01" / "20261201T120000Z-abcdef.json").write_text(json.dumps(_doc()))
    html = render_html(load_fleet(tmp_path))
    assert "Floors and where they come from" in html
    assert 'class="badge origin-calibration">calibration<' in html
    assert 'class="badge origin-choice">gpufleet&#39;s choice<' in html
