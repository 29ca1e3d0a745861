"""Every figure the workloads write, by the source: each resolves to one gpufleet.floors.names
entry, and that entry's name is the one the report, the textfile and the floors use.

tests/unit/test_figure_names.py walks the recorded workload documents; allreduce and
input_pipeline have none (they need GPUs to say anything), so this file reads the names the
workloads write from their source (``run.ab``/``run.sample_check`` metric arguments,
``run.metrics[...]`` stores, ``run.floor``/``speed_skip`` names) and feeds each registry figure
through the report and the textfile in a synthetic document (SYNTHETIC: made up here, one
figure at a time, value 1.0). A figure renamed in one place only (a workload, a floor, a report
rule, the registry) fails here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import pytest

from gpufleet.floors import calibration
from gpufleet.floors.derived import FloorError
from gpufleet.floors.names import FIGURE, NAMES, SCALING, SPEEDUP, dotted
from gpufleet.report.figures import figures_of
from gpufleet.report.prometheus import render
from tests.conftest import REPO_ROOT

WORKLOADS = REPO_ROOT / "validation" / "workloads"
# Modules shared by several workloads, and the workloads they write for.
SHARED = {"_throughput": ("resnet50", "bert_large"), "_run": (), "_common": ()}
# Metrics the workloads write that are no figure with a floor: correctness and memory
# diagnostics judged against a tolerance of thresholds.toml (the key in the comment), or
# evidence. They are not headline figures of the report.
NOT_FIGURES = (
    r"(.+_)?loss_max_relative_difference",  # *_loss_rtol
    r"hlo_fusion_mentions",  # evidence: XLA fused
    r".+_product_error",  # gemm: the product against float64
    r"nccl_transport",  # evidence: the transport NCCL logged
    r"busbw_gbps_by_size",  # the all-reduce table; its largest size is the figure
    r"max_abs_weight_difference|max_weight_change",  # grad_accumulation_rtol / _atol
    r"peak_extra_mib(_whole)?",  # grad_accumulation_peak_ratio_max
    r"process_memory_mib|device_memory_mib|free_fraction|memory_source",  # memory_growth
)
WORKLOAD_FAMILIES = (FIGURE, SPEEDUP, SCALING)
WILD = "[a-z0-9_.]+"  # an f-string's {...}


def _patterns(node: ast.AST | None, names: dict[str, ast.AST], depth: int = 0) -> list[str]:
    """The metric names an expression can give, as regular expressions (f-strings, +, x if c)."""
    if node is None or depth > 5:
        return [WILD]
    if isinstance(node, ast.Constant):
        return [re.escape(node.value)] if isinstance(node.value, str) else []
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else WILD for v in node.values]
        return ["".join(parts)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _patterns(node.left, names, depth + 1)
        return [a + b for a in left for b in _patterns(node.right, names, depth + 1)]
    if isinstance(node, ast.IfExp):
        return _patterns(node.body, names, depth + 1) + _patterns(node.orelse, names, depth + 1)
    if isinstance(node, ast.Name) and node.id in names:
        return _patterns(names[node.id], names, depth + 1)
    return [WILD]


def _assignments(function: ast.AST) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = node.value
    return found


def _written(tree: ast.Module) -> Iterator[tuple[str, str, int]]:
    """(what, pattern, line): "metric" for a figure written, "floor" for a floor asked for."""
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        names = _assignments(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                if attr in ("ab", "sample_check") and len(node.args) >= 2:
                    for pattern in _patterns(node.args[1], names):
                        yield "metric", pattern, node.lineno
                elif attr == "floor" and node.args:
                    for pattern in _patterns(node.args[0], names):
                        yield "floor", pattern, node.lineno
                elif attr == "update" and _is_metrics(node.func.value):
                    for keyword in node.keywords:
                        yield "metric", re.escape(str(keyword.arg)), node.lineno
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "speed_skip":
                for pattern in _patterns(node.args[1], names):
                    yield "floor", pattern, node.lineno
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and _is_metrics(target.value):
                        for pattern in _patterns(target.slice, names):
                            yield "metric", pattern, node.lineno


def _is_metrics(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "metrics"


def _spellings(workload: str) -> list[str]:
    """Every metric spelling gpufleet knows for a figure of ``workload`` (names and aliases)."""
    out = []
    for entry in NAMES.values():
        for name in (entry.name, *entry.aliases):
            own, _, metric = name.rpartition("/")
            if own in ("", workload):
                out.append(metric)
                out.append(metric.removeprefix(f"{workload}."))  # undotted: the workload's
    return out


def written_by_the_workloads() -> list[tuple[str, str, str, str]]:
    """(module, workload, what, pattern) for every name the workload sources write or ask for."""
    found = []
    for path in sorted(WORKLOADS.glob("*.py")):
        workloads = SHARED.get(path.stem, (path.stem,))
        for what, pattern, line in _written(ast.parse(path.read_text(encoding="utf-8"))):
            for workload in workloads:
                found.append((f"{path.name}:{line}", workload, what, pattern))
    return found


WRITTEN = written_by_the_workloads()


def test_the_scan_finds_the_workloads_figures() -> None:
    metrics = {(w, p) for _, w, what, p in WRITTEN if what == "metric"}
    floors = {p for _, _, what, p in WRITTEN if what == "floor"}
    assert ("xla", r"xla\.speedup\." + WILD) in metrics  # an f-string
    assert ("mirrored", r"scaling_efficiency\.xla") in metrics  # "..." + (".xla" if jit ...)
    assert ("input_pipeline", "tuned_speedup_vs_naive") in metrics
    assert ("allreduce", "busbw_fraction_of_nccl_tests") in metrics
    assert r"allreduce\.busbw_fraction_of_nccl_tests" in floors
    assert len(metrics) > 20 and len(floors) > 6


@pytest.mark.parametrize("where,workload,what,pattern", WRITTEN, ids=lambda v: str(v))
def test_every_written_name_is_one_registry_figure(
    where: str, workload: str, what: str, pattern: str
) -> None:
    if what == "floor":  # run.floor and speed_skip take today's dotted name, never an alias
        if pattern == WILD:
            return  # a helper passing its caller's name on (speed_skip's run.floor(metric))
        assert any(re.fullmatch(pattern, name) for name in NAMES), (where, pattern)
        return
    if any(re.fullmatch(other, pattern.replace("\\", "")) for other in NOT_FIGURES):
        return
    figures = {dotted(workload, m) for m in _spellings(workload) if re.fullmatch(pattern, m)}
    assert figures & set(NAMES), f"{where}: {workload} writes {pattern!r}, no registry figure"


def _workload_figures() -> list[tuple[str, str]]:
    """(figure, the metric today's workload writes it under) of every workload figure."""
    out = []
    for entry in NAMES.values():
        if entry.prometheus not in WORKLOAD_FAMILIES:
            continue
        workload = entry.name.split(".")[0]
        metrics = [a.split("/", 1)[1] for a in entry.aliases if a.startswith(f"{workload}/")]
        out.append((entry.name, metrics[0] if metrics else entry.name))
    return out


@pytest.mark.parametrize("name,metric", _workload_figures(), ids=lambda v: str(v))
def test_every_workload_figure_is_a_report_row_and_a_series_by_its_name(
    name: str, metric: str
) -> None:
    workload = name.split(".")[0]
    doc = {
        "host": "h",
        "run_id": "r",
        "tier": "full",
        "status": "pass",
        "workloads": [{"workload": workload, "metrics": {metric: 1.0}, "checks": []}],
    }
    (figure,) = figures_of(doc)
    assert figure.name == name  # the report row
    text = render(doc)
    family = NAMES[name].prometheus
    assert re.search(rf'^{family}\{{[^}}]*figure="{re.escape(name)}"', text, re.M), text
    assert dotted(workload, metric) == name  # thresholds --judge and calibration


def test_a_calibration_file_may_use_a_figures_old_name() -> None:
    data = {
        "schema": 1,
        "gpu_model": "NVIDIA A100-SXM4-80GB",
        "gpu_count": 8,
        "interconnect": "nvswitch",
        "figures": {"gemm.fp16_fraction_of_peak": {"values": [0.8, 0.82]}},
    }
    cal = calibration.parse(data, "old.toml")
    assert list(cal.figures) == ["gemm.fraction_of_peak.fp16"]
    data["figures"]["gemm.fraction_of_peak.fp16"] = {"values": [0.8]}
    with pytest.raises(FloorError, match=r"one figure, 'gemm\.fraction_of_peak\.fp16'"):
        calibration.parse(data, "old.toml")


def test_the_report_threshold_is_the_floor_the_workload_judged() -> None:
    # gemm records its legacy gemm_<p>_fraction_min (0.5) whichever decides; the floor it judged
    # is the one recorded under the dotted name.
    floor = {"value": 0.77, "unit": "fraction", "bound": "min", "origin": "published"}
    workload = {
        "workload": "gemm",
        "metrics": {"fp16_fraction_of_peak": 0.8},
        "config": {
            "thresholds": {"gemm_fp16_fraction_min": 0.5},
            "floors": {"gemm.fraction_of_peak.fp16": floor},
        },
        "checks": [],
    }
    (figure,) = figures_of({"workloads": [workload]})
    assert figure.threshold == 0.77
    workload["config"]["floors"]["gemm.fraction_of_peak.fp16"] = {"value": None}
    (figure,) = figures_of({"workloads": [workload]})
    assert figure.threshold == 0.5  # no floor: the thresholds.toml key decides
