"""The inventory's ``thresholds`` take a judged figure's dotted name (issue 33 item 5), the one
``gpufleet thresholds``, the report and the textfile call it by; the older keys stay."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from gpufleet.commands.thresholds import main as thresholds
from gpufleet.floors.derived import floors_for
from gpufleet.floors.names import JUDGED_FLOORS, NAMES, SETTABLE, apply_overrides
from gpufleet.spec.checks import threshold_errors
from tests.unit.test_figure_names_written import WILD, WRITTEN
from validation.verdicts.thresholds import ThresholdsError, load_thresholds_with_sources
from validation.workloads._common import load_run_limits
from validation.workloads._refsteps import FIGURES
from validation.workloads._run import Run
from validation.workloads._throughput import speed_skip

A100 = "NVIDIA A100-SXM4-80GB"


def test_the_judged_floors_are_the_ones_the_workloads_ask_for() -> None:
    asked = {p for _, _, what, p in WRITTEN if what == "floor" and not p.startswith(WILD)}
    # _throughput asks for f"{FIGURES[name]}.{precision}": the reference steps' figures
    asked |= {re.escape(f"{figure}.") + WILD for figure in FIGURES.values()}
    judged = {n for n in NAMES if any(re.fullmatch(p, n) for p in asked)}
    assert judged == set(JUDGED_FLOORS)
    keyed = {n for n, e in NAMES.items() if e.threshold_key and n not in JUDGED_FLOORS}
    assert keyed == SETTABLE - JUDGED_FLOORS


def test_a_dotted_name_sets_its_own_floor_and_beats_the_key() -> None:
    floors = floors_for(A100, 1, "single_gpu")
    set_ = {f.name: f for f in apply_overrides(floors, {"xla.speedup.amp": 1.3})}
    assert set_["xla.speedup.amp"].value == 1.3
    assert set_["xla.speedup.amp"].origin == "inventory override: thresholds xla.speedup.amp = 1.3"
    assert set_["xla.speedup.tf32"].value is None  # the other precision keeps its floor
    both = {"xla.speedup.amp": 1.3, "xla_speedup_min": 1.1}
    set_ = {f.name: f for f in apply_overrides(floors, both)}
    assert (set_["xla.speedup.amp"].value, set_["xla.speedup.tf32"].value) == (1.3, 1.1)


def test_a_dotted_name_stands_for_its_thresholds_key() -> None:
    values, sources = load_thresholds_with_sources(None, None, {"allreduce.busbw_gbps": 300})
    assert values["allreduce_busbw_min_gbps"] == 300.0  # what allreduce.choose_floor reads
    assert sources["allreduce_busbw_min_gbps"] == "inventory override"
    values, _ = load_thresholds_with_sources(
        None, None, {"input_pipeline.tuned_speedup_vs_naive": 3}
    )
    assert values["input_pipeline_tuned_speedup_min"] == 3.0
    with pytest.raises(ThresholdsError, match=r"give only 'allreduce\.busbw_gbps'"):
        load_thresholds_with_sources(
            None, None, {"allreduce.busbw_gbps": 300, "allreduce_busbw_min_gbps": 200}
        )
    # the same value twice is one floor said twice, not a conflict
    load_thresholds_with_sources(
        None, None, {"allreduce.busbw_gbps": 3, "allreduce_busbw_min_gbps": 3}
    )


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("xla.speedup.amq", "did you mean 'xla.speedup.amp'?"),
        ("xla.speedup", ""),  # an older gpufleet's figure: nothing judges it now
        ("gemm.tflops.fp16", ""),  # restates the fraction of peak: its floor is not judged
    ],
)
def test_the_inventory_refuses_a_figure_nothing_judges(given: str, hint: str) -> None:
    (message,) = threshold_errors({given: 1.2})
    assert f"unknown threshold {given!r}" in message and hint in message
    assert "a judged figure's dotted name" in message
    assert threshold_errors({"xla.speedup.amp": 1.2}) == []


def test_the_xla_workload_judges_the_floor_its_dotted_name_sets() -> None:
    run = Run(workload="xla", args=argparse.Namespace(quick=False))
    run.gpus, run.gpu_model, run.compute_capability = ["/device:GPU:0"], A100, (8, 0)
    run.args.thresholds = '{"xla.speedup.amp": 1.25}'
    load_run_limits(run, None)
    assert speed_skip(run, "xla.speedup.amp") == (1.25, None)
    _, skip = speed_skip(run, "xla.speedup.tf32")
    assert skip is not None and skip.startswith("not judged")  # no floor: reported only


def test_thresholds_limit_shows_the_floor_a_dotted_name_set(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    inv = tmp_path / "inv.py"
    data = {"gpu_count": 1, "thresholds": {"xla.speedup.amp": 1.2}}
    inv.write_text(f"gpus = (['gpu-a'], {data!r})\n")
    argv = [str(inv), "--limit", "gpu-a", "--gpu-model", "A100-SXM4-80GB"]
    assert thresholds([*argv, "--interconnect", "single_gpu", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    floors = {f["name"]: f for f in shown["floors"]}
    assert floors["xla.speedup.amp"]["value"] == 1.2
    assert floors["xla.speedup.amp"]["origin"].endswith("thresholds xla.speedup.amp = 1.2")
    suite = {row["name"]: row for row in shown["thresholds"]}
    assert suite["xla.speedup.amp"]["source"] == "inventory override"
