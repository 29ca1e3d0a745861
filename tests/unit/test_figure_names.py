"""One dotted name per judged figure (issue 33 item 5): the registry against every surface.

The floors (`gpufleet thresholds`), the report's figures, the textfile's ``figure`` label and
`thresholds --judge` must all call a figure by its gpufleet.floors.names entry. The workload
documents are the recorded ones of tests/fixtures/results/workloads (SOURCES.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpufleet.commands.thresholds import main as thresholds
from gpufleet.floors.checks import figures_from
from gpufleet.floors.derived import floors_for
from gpufleet.floors.names import ALIASES, FIGURE, NAMES, apply_overrides, canonical
from gpufleet.report.figures import figures_of
from gpufleet.report.metric_units import RENAMED
from gpufleet.report.prometheus import render
from gpufleet.validate.baseline import margin_of
from tests.conftest import REPO_ROOT
from tests.unit.test_metric_names import written_names
from validation.verdicts.thresholds import load_thresholds

RECORDED = sorted((REPO_ROOT / "tests/fixtures/results/workloads").glob("*.json"))
KINDS = [
    ("NVIDIA A100-SXM4-80GB", 8, "nvswitch"),
    ("NVIDIA H100 80GB HBM3", 8, "nvswitch"),
    ("NVIDIA A100-SXM4-80GB", 1, "single_gpu"),
    ("Tesla V100-SXM2-16GB", 8, "nvlink"),
]
LABEL = re.compile(r'^(gpufleet_[a-z_]+)\{[^}]*figure="([^"]+)"')


def recorded(path: Path) -> dict[str, Any]:
    workload = json.loads(path.read_text())
    return {"host": "h", "run_id": "r", "tier": "quick", "status": "pass", "workloads": [workload]}


def test_the_registry_has_one_spelling_per_figure() -> None:
    aliases = [a for e in NAMES.values() for a in e.aliases]
    assert len(aliases) == len(set(aliases)) == len(ALIASES)  # no old name means two figures
    assert not set(aliases) & set(NAMES)  # an old name is never another figure's own
    for entry in NAMES.values():
        workload, _, rest = entry.name.partition(".")
        assert workload and rest and entry.unit, entry
        assert canonical(workload, rest) == entry.name
        assert all(canonical(workload, a.split("/")[-1]) == entry.name for a in entry.aliases)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k[1]}x{k[0]}")
def test_every_floor_is_a_registry_name_with_its_unit(kind: tuple[str, int, str]) -> None:
    floors = floors_for(*kind)
    assert floors
    assert {f.name: f.unit for f in floors} == {f.name: NAMES[f.name].unit for f in floors}


def test_thresholds_rows_are_registry_names(capsys: pytest.CaptureFixture) -> None:
    argv = ["--gpu-model", "NVIDIA A100-SXM4-80GB", "--gpu-count", "8", "--interconnect"]
    assert thresholds([*argv, "nvswitch", "--json"]) == 0
    rows = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert "xla.speedup.amp" in rows and set(rows) <= set(NAMES)
    # The inventory keys that set a floor are thresholds the inventory may give.
    keys = {e.inventory_key for e in NAMES.values() if e.inventory_key}
    assert {"xla_speedup_min", "allreduce_busbw_min_gbps"} <= keys
    assert keys <= set(load_thresholds(None, None))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_the_report_and_the_metrics_use_the_floors_names(path: Path) -> None:
    doc = recorded(path)
    workload = doc["workloads"][0]
    names = {f.name for f in figures_of(doc)}
    assert names and names <= set(NAMES), names  # every headline figure by its registry name
    # The workload recorded the floors it faced under the floor's name: the report's match.
    assert set(workload["config"].get("floors", {})) <= names
    written: dict[str, set[str]] = {}
    for line in render(doc).splitlines():
        match = LABEL.match(line)
        if match:
            written.setdefault(match.group(2), set()).add(match.group(1))
    assert set(written) == names
    for name, families in written.items():  # its own family, and the all-figures one
        assert {FIGURE, NAMES[name].prometheus} <= families, name


def test_judge_takes_the_names_the_workloads_write(capsys: pytest.CaptureFixture) -> None:
    gemm = json.loads((REPO_ROOT / "tests/fixtures/results/workloads/gemm.json").read_text())
    gemm["metrics"]["fraction_of_peak.fp16"] = {"0": 0.61}  # per-GPU, as gemm writes it
    gemm["metrics"]["fp16_fraction_of_peak"] = 0.61
    figures = figures_from(gemm)
    assert figures["gemm.fraction_of_peak.fp16"] == {"0": 0.61}  # the map, not its minimum
    assert "gemm.tflops.fp32" in figures
    assert figures_from({"allreduce/busbw_gbps_largest": 230.0}) == {"allreduce.busbw_gbps": 230.0}


def test_old_prometheus_names_of_judged_figures_are_aliases() -> None:
    families = {e.prometheus for e in NAMES.values() if e.prometheus}
    twins = {new for new, _ in RENAMED.values()}  # written beside their old-unit names
    assert families <= written_names() | twins  # each is a family gpufleet writes
    for old, (new, _) in RENAMED.items():
        for entry in NAMES.values():
            if entry.prometheus == new:
                assert old in entry.aliases, (old, entry.name)
    assert NAMES["nccl_tests.busbw"].prometheus == RENAMED["gpufleet_nccl_busbw_gbps"][0]


def test_xla_speedup_min_sets_the_xla_floors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # The key the docs name as the override example (reference key notes, spec checks): it
    # set nothing the XLA workload read (its floors are xla.speedup.*, run.floor).
    floors = apply_overrides(floors_for("NVIDIA A100-SXM4-80GB", 1, "single_gpu"), {})
    assert [f.value for f in floors if f.name.startswith("xla.")] == [None, None]
    overridden = apply_overrides(floors, {"xla_speedup_min": 1.2})
    xla = {f.name: f for f in overridden if f.name.startswith("xla.")}
    assert sorted(xla) == ["xla.speedup.amp", "xla.speedup.tf32"]  # the host's precisions only
    assert {f.value for f in xla.values()} == {1.2}
    assert all("inventory override" in f.origin for f in xla.values())
    assert apply_overrides(floors, {"xla_speedup_min": 0}) == floors  # 0: not asserted
    # No floors at all (a model without figures): the override is the floor.
    assert {f.name for f in apply_overrides([], {"xla_speedup_min": 1.2})} >= {"xla.speedup.amp"}
    inv = tmp_path / "inv.py"
    inv.write_text('gpus = (["gpu-a"], {"gpu_count": 1, "thresholds": {"xla_speedup_min": 1.2}})\n')
    argv = [str(inv), "--limit", "gpu-a", "--gpu-model", "A100-SXM4-80GB"]
    assert thresholds([*argv, "--interconnect", "single_gpu", "--json"]) == 0
    shown = {f["name"]: f for f in json.loads(capsys.readouterr().out)["floors"]}
    assert shown["xla.speedup.amp"]["value"] == 1.2


def test_a_margin_and_a_regression_take_the_dotted_name() -> None:
    key = "gemm/fp16_fraction_of_peak"  # the baseline's key of gemm.fraction_of_peak.fp16
    assert margin_of(key, {"gemm.fraction_of_peak.fp16": 0.25}, 0.1) == 0.25
    assert margin_of(key, {key: 0.3, "gemm.fraction_of_peak.fp16": 0.25}, 0.1) == 0.3
    assert margin_of("xla/speedup", {"xla.speedup.amp": 0.25}, 0.1) == 0.1  # another figure
    doc = recorded(RECORDED[0])
    state = {"state": "regressed", "runs": 5, "wanted": 5}
    text = render(doc, regression={**state, "figures": {key: {"status": "regressed"}}})
    line = 'gpufleet_figure_regressed{figure="gemm.fraction_of_peak.fp16",key="' + key + '"} 1'
    assert line in text.splitlines()
