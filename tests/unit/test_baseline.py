"""validate.baseline: baselines of several qualifying runs per tier; regressions by CUSUM."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpufleet.validate import baseline
from gpufleet.validate.baseline import regression_verdict
from gpufleet.validate.results import safe_name
from tests.unit import fleet_factory as ff

JITTER = (1.0, 1.015, 0.985, 1.02, 0.98)


def full_run(day: int, scale: float = 1.0, failing: tuple[str, ...] = (), **kw: float) -> dict:
    return ff.document(
        "gpu-a", started_at=ff.when(day), workloads=ff.gpu_workloads(scale, **kw), failing=failing
    )


def gathered(tmp_path: Path, tier: str = "full") -> dict:
    """A complete full-tier baseline of five runs with ~1.5 % jitter."""
    for hour, scale in enumerate(JITTER):
        doc = ff.document(
            "gpu-a", started_at=ff.when(1, hour), workloads=ff.gpu_workloads(scale), tier=tier
        )
        baseline.record_run(tmp_path, doc)
    found = baseline.load_baseline(baseline.baseline_path(tmp_path, "gpu-a"))
    assert found is not None and baseline.complete(found)
    return found


def test_the_baseline_gathers_five_qualifying_full_runs_then_stays(tmp_path: Path) -> None:
    failing = full_run(2, failing=("driver_packages_locked",))
    assert baseline.record_run(tmp_path, failing) is None
    path = None
    for day in range(3, 8):
        path = baseline.record_run(tmp_path, full_run(day))
        assert path == tmp_path / "gpu-a" / "baseline.json"
    assert baseline.record_run(tmp_path, full_run(9, scale=0.5)) is None  # complete: stays
    stored = baseline.load_baseline(tmp_path / "gpu-a" / "baseline.json")
    assert stored is not None and len(stored["runs"]) == baseline.RUNS_WANTED["full"] == 5
    assert [r["run_id"] for r in stored["runs"]] == [full_run(d)["run_id"] for d in range(3, 8)]


def test_each_tier_has_its_own_baseline(tmp_path: Path) -> None:
    quick = ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads(), tier="quick")
    path = baseline.record_run(tmp_path, quick)
    assert path == tmp_path / "gpu-a" / "baseline-quick.json"
    assert not (tmp_path / "gpu-a" / "baseline.json").exists()
    # A quick run is never compared with the full tier's baseline.
    assert baseline.compare(gathered(tmp_path), {**quick, "run_id": "later"}) == []


def test_an_unproven_run_never_qualifies() -> None:
    doc = full_run(3)
    doc["checks"][-1]["status"] = "inconclusive"
    assert not baseline.qualifies({**doc, "status": "unproven"})
    assert not baseline.qualifies({**doc, "schema_version": 1, "status": "pass"})
    assert baseline.qualifies(full_run(3))


def test_baseline_folder_matches_validate_results_layout() -> None:
    for name in ("gpu-a", "@ssh/gpu-b", "10.0.0.5", "a b"):
        assert baseline.baseline_path("r", name).parent.name == safe_name(name)


def test_a_drop_is_judged_from_the_baseline_spread_even_above_threshold(tmp_path: Path) -> None:
    base = gathered(tmp_path)
    later = full_run(9, xla=1.2)
    assert later["status"] == "pass"  # 1.2 still clears xla_speedup_min 1.1
    found = baseline.compare(base, later)
    assert [r.key for r in found] == ["xla/speedup"]
    assert found[0].meets_threshold is True
    assert found[0].change == pytest.approx(1.2 / 1.42 - 1, abs=0.01)
    assert "below the baseline level" in found[0].message
    assert "still meets its threshold 1.1" in found[0].message
    assert baseline.compare(base, full_run(10, scale=0.97)) == []  # within the spread
    assert baseline.compare(base, full_run(11, scale=1.3)) == []  # faster is no regression


def test_each_measurement_is_compared_once(tmp_path: Path) -> None:
    found = baseline.compare(gathered(tmp_path), full_run(9, scale=0.6))
    keys = [r.key for r in found]
    assert "gemm/fp16_fraction_of_peak" in keys and "gemm/fp16_tflops" not in keys
    assert "mirrored/scaling_efficiency" in keys and "mirrored/throughput_ratio" not in keys


def test_a_vanished_figure_is_reported(tmp_path: Path) -> None:
    base = gathered(tmp_path)
    later = full_run(9)
    later["workloads"] = [w for w in later["workloads"] if w["workload"] != "xla"]
    found = baseline.compare(base, later)
    assert [r.key for r in found] == ["xla/speedup"]
    assert found[0].current is None and "missing or not finite" in found[0].message


def test_margin_sets_the_drop_the_detector_is_tuned_for(tmp_path: Path) -> None:
    with pytest.raises(baseline.BaselineError, match=r"0\.10 for 10 %"):
        baseline.compare(gathered(tmp_path), full_run(4), margin=10)


def test_not_applicable_figures_are_never_regressions() -> None:
    cpu = ff.recorded("validate-local-quick.json")
    slower = json.loads(json.dumps(cpu))
    for workload in slower["workloads"]:
        workload["metrics"] = {
            k: v / 3 if isinstance(v, float) else v for k, v in workload["metrics"].items()
        }
    slower["run_id"] += "-later"
    assert baseline.compare(cpu, slower) == []


def test_regression_verdict_contract() -> None:
    level = [1.50, 1.52, 1.49, 1.51, 1.48]
    assert regression_verdict(level, [1.2]).status == "regressed"
    assert regression_verdict(level, [1.49]).status == "ok"
    assert regression_verdict(level[:3], [1.0]).status == "inconclusive"  # 3 of 5 runs
    assert regression_verdict(level, []).status == "inconclusive"
    for bad in (None, math.nan, math.inf):
        verdict = regression_verdict(level, [1.5, bad])
        assert verdict.status == "regressed" and "missing or not finite" in verdict.reason
    # Lower is better (a slowdown): a rise is the regression.
    assert regression_verdict(level, [1.8], higher_is_better=False).status == "regressed"
    assert regression_verdict(level, [1.2], higher_is_better=False).status == "ok"


def test_a_zero_baseline_is_compared_in_absolute_terms() -> None:
    zeros = [0.0] * 5
    assert regression_verdict(zeros, [-5.0]).status == "regressed"
    assert regression_verdict(zeros, [-0.01]).status == "ok"
    slowdown = [0.02, 0.03, 0.02, 0.025, 0.02]
    assert (
        regression_verdict(slowdown, [0.05], higher_is_better=False, absolute=True).status == "ok"
    )
    rose = regression_verdict(slowdown, [0.3], higher_is_better=False, absolute=True)
    assert rose.status == "regressed" and "absolute" in rose.reason


def test_a_sustained_drop_builds_up_over_the_periodic_history() -> None:
    level = [1.0, 1.01, 0.99, 1.02, 0.98]
    history = [1.0, 0.99, 1.01] + [0.92] * 3  # an 8 % drop: no single run is far enough off
    assert regression_verdict(level, history[:4]).status == "ok"
    assert regression_verdict(level, history[:5]).status == "ok"
    verdict = regression_verdict(level, history)
    assert verdict.status == "regressed" and verdict.alarm_at is not None


def test_unreadable_baseline_says_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("{not json")
    with pytest.raises(baseline.BaselineError, match="delete it"):
        baseline.load_baseline(path)
    assert baseline.load_baseline(tmp_path / "absent.json") is None


def test_a_version_1_baseline_is_read_as_one_run(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    first = full_run(3)
    path.write_text(json.dumps(first))
    stored = baseline.load_baseline(path)
    assert stored is not None and stored["run_id"] == first["run_id"]
    assert len(stored["runs"]) == 1 and not baseline.complete(stored)
