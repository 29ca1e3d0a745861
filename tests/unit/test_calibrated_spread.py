"""Issue 32 item 2: calibration records each figure's spread between runs; the verdicts use it."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from gpufleet.floors import calibration
from gpufleet.floors.derived import Floor, FloorError
from gpufleet.floors.names import dotted
from gpufleet.validate import calibfile
from validation.verdicts import harness
from validation.workloads import _run
from validation.workloads._floors import load_floors, read_calibration
from validation.workloads._run import Run

A100 = "NVIDIA A100-SXM4-40GB"
RESNET = "resnet50.images_per_s.amp"
# Speed-up floors near 1, where one process with the assumed 5 % decides neither way: a
# healthy 1.10x of a 1.05 floor is not proven above "no effect" (1.0), and no effect against
# a 1.10 floor is not proven below it; a measured 2 % decides both.
HEALTHY = (1.05, 1.10 * 1.05, "pass")
NO_EFFECT = (1.10, 1.0, "fail")


def _figure(values: tuple[float, ...]) -> calibfile.FigureRuns:
    return calibfile.FigureRuns(RESNET, values, "images/s", "min", None)


def _render(*figures: calibfile.FigureRuns) -> str:
    kind = (A100, 8, "nvswitch")
    return calibfile.render(
        kind, host="gpu01", date="2026-12-04", margin=0.9, figures=figures, run_ids=["r1"]
    )


def test_the_spread_is_the_sd_of_the_log_between_runs_and_needs_two_runs() -> None:
    values = [2000.0, 2040.0, 2080.0]
    expected = float(np.std(np.log(values), ddof=1))
    assert calibration.between_run_sd(values) == pytest.approx(expected)
    assert calibration.between_run_sd(values) == pytest.approx(0.02, abs=5e-4)
    assert calibration.between_run_sd([2000.0]) is None


def test_calibration_of_runs_with_a_known_spread_records_it_next_to_the_floor(
    tmp_path,
) -> None:
    text = _render(_figure((2000.0, 2040.0, 2080.0)))
    assert "between_run_sd = 0.0196" in text
    path = tmp_path / "a100.toml"
    path.write_text(text, encoding="utf-8")
    cal = calibration.load(path)
    assert cal.figures[RESNET].between_run_sd == pytest.approx(0.0196, abs=1e-4)
    floor = Floor(RESNET, 1900.0, "images/s", "published")
    (applied,) = calibration.apply([floor], cal, A100, 8, "nvswitch")
    assert applied.value == pytest.approx(2040.0 * 0.9)
    assert applied.between_run_sd == pytest.approx(0.0196, abs=1e-4)


def test_one_run_records_no_spread_and_says_so(tmp_path) -> None:
    text = _render(_figure((2000.0,)))
    assert "between_run_sd =" not in text
    assert "# between_run_sd: none (1 run; 2 or more needed): the verdicts assume 5 %" in text
    path = tmp_path / "a100.toml"
    path.write_text(text, encoding="utf-8")
    assert calibration.load(path).figures[RESNET].between_run_sd is None


@pytest.mark.parametrize(
    ("values", "sd", "message"),
    [([1.0, 2.0], -0.1, "finite number >= 0"), ([1.0], 0.02, "needs 2 runs")],
)
def test_a_bad_between_run_sd_is_refused_with_the_fix(
    values: list[float], sd: float, message: str
) -> None:
    data = {
        "schema": 1,
        "gpu_model": A100,
        "gpu_count": 8,
        "interconnect": "nvswitch",
        "figures": {RESNET: {"values": values, "between_run_sd": sd}},
    }
    with pytest.raises(FloorError, match=message):
        calibration.parse(data, "cal.toml")


def _gpu_run(quick: bool, gpus: int = 8) -> Run:
    run = Run(workload="resnet50", args=argparse.Namespace(quick=quick))
    run.gpus = [f"/device:GPU:{i}" for i in range(gpus)]
    run.gpu_model = A100 if gpus else None
    run.config["topology"] = {"name": "nvswitch", "reason": "from the test"}
    return run


def _doc(**extra: object) -> dict:
    return {
        "schema": 1,
        "gpu_model": A100,
        "gpu_count": 8,
        "interconnect": "nvswitch",
        "host": "gpu01",
        "figures": {RESNET: {"values": [2000.0, 2040.0, 2080.0], "between_run_sd": 0.02}},
        **extra,
    }


def test_the_workloads_floor_carries_the_calibrated_spread() -> None:
    run = _gpu_run(quick=False)
    load_floors(run, read_calibration(json.dumps(_doc())))
    assert run.spread_for(RESNET) == (0.02, "calibration --calibration")
    assert run.floors[RESNET].value == pytest.approx(2040.0 * 0.9)


def test_the_quick_tier_takes_the_spreads_but_keeps_the_published_floors() -> None:
    run = _gpu_run(quick=True)
    load_floors(run, _doc(spreads_only=True, path="cal/a100.toml"))
    assert run.spread_for(RESNET) == (0.02, "calibration cal/a100.toml")
    assert run.floors[RESNET].value == pytest.approx(1900.0)  # the published floor
    assert run.floors[RESNET].origin.startswith("published")


def test_a_gpu_less_quick_tier_takes_no_floors_from_a_calibration() -> None:
    run = _gpu_run(quick=True, gpus=0)
    cpu = {"gpu_model": "cpu", "gpu_count": 0, "interconnect": "none"}
    load_floors(
        run, _doc(spreads_only=True, **cpu) | {"figures": {"xla.speedup": {"values": [1.2]}}}
    )
    assert run.floors == {}


def _speedup_run(
    sd: float | None, floor: float, monkeypatch: pytest.MonkeyPatch
) -> tuple[Run, str]:
    """One process (the quick tier) judging a speed-up, its floor calibrated with spread ``sd``;
    timings from a clock that returns what the arm returns (no sleeping)."""

    def fake_compare(*args: object, **kwargs: object) -> harness.ABResult:
        return harness.compare_ab(*args, clock=lambda fn: fn(), **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_run, "compare_ab", fake_compare)
    run = Run(workload="xla", args=argparse.Namespace(quick=True))
    name = dotted("xla", "speedup")
    run.floors = {
        name: Floor(
            name, floor, "x", "calibration", between_run_sd=sd, spread_source="calibration c.toml"
        )
    }
    return run, name


def _arms(speedup: float) -> tuple[object, object]:
    """Arm A at 1 s, arm B at 1 s / ``speedup``, each with 0.2 % independent noise."""
    rng = np.random.default_rng(7)
    a = iter(1.0 + 0.002 * rng.standard_normal(200))
    b = iter((1.0 + 0.002 * rng.standard_normal(200)) / speedup)
    return (lambda: next(a)), (lambda: next(b))


def _judge(run: Run, floor: float, speedup: float) -> dict:
    run_a, run_b = _arms(speedup)
    run.ab("speedup", "speedup", run_a, run_b, threshold=floor, pairs=12, device="GPU:0")
    return run.checks[-1]


@pytest.mark.parametrize(("floor", "speedup", "status"), [HEALTHY, NO_EFFECT])
def test_a_calibrated_2_percent_spread_decides_the_quick_tier(
    floor: float, speedup: float, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, _ = _speedup_run(0.02, floor, monkeypatch)
    check = _judge(run, floor, speedup)
    assert check["status"] == status, check["reason"]
    assert check["evidence"]["between_run_sd"] == 0.02
    assert check["evidence"]["spread_source"] == "calibration c.toml"


@pytest.mark.parametrize(("floor", "speedup", "_"), [HEALTHY, NO_EFFECT])
def test_the_assumed_5_percent_leaves_both_unproven(
    floor: float, speedup: float, _: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, _name = _speedup_run(None, floor, monkeypatch)
    check = _judge(run, floor, speedup)
    assert check["status"] == "inconclusive", check["reason"]
    assert check["evidence"]["between_run_sd"] is None
    assert check["evidence"]["spread_source"] == "default"
    assert "(default)" in check["reason"]


def test_the_inventory_spread_is_used_where_calibration_has_none() -> None:
    run = Run(workload="xla", args=argparse.Namespace(quick=True))
    run.thresholds["speed_between_run_sd"] = 0.03
    assert run.spread_for("speedup") == (0.03, "inventory speed_between_run_sd")
    assert run.spread_for(None) == (0.03, "inventory speed_between_run_sd")
