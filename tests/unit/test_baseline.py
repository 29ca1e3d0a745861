"""validate.baseline: the first passing full run is kept; later falls beyond the margin flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.validate import baseline
from gpufleet.validate.results import safe_name
from tests.unit import fleet_factory as ff


def full_run(day: int, scale: float = 1.0, failing: tuple[str, ...] = ()) -> dict:
    return ff.document(
        "gpu-a", started_at=ff.when(day), workloads=ff.gpu_workloads(scale), failing=failing
    )


def test_first_passing_full_run_becomes_the_baseline(tmp_path: Path) -> None:
    quick = ff.document("gpu-a", started_at=ff.when(1), workloads=ff.gpu_workloads(), tier="quick")
    failing = full_run(2, failing=("driver_packages_locked",))
    first, second = full_run(3), full_run(4, scale=0.5)
    assert baseline.record_run(tmp_path, quick) is None
    assert baseline.record_run(tmp_path, failing) is None
    path = baseline.record_run(tmp_path, first)
    assert path == tmp_path / "gpu-a" / "baseline.json"
    assert baseline.record_run(tmp_path, second) is None  # the first one stays
    stored = baseline.load_baseline(path)
    assert stored is not None and stored["run_id"] == first["run_id"]


def test_baseline_folder_matches_validate_results_layout() -> None:
    for name in ("gpu-a", "@ssh/gpu-b", "10.0.0.5", "a b"):
        assert baseline.baseline_path("r", name).parent.name == safe_name(name)


def test_a_fall_beyond_the_margin_is_a_regression_even_above_threshold() -> None:
    base = full_run(3)
    later = ff.document("gpu-a", started_at=ff.when(9), workloads=ff.gpu_workloads(xla=1.2))
    assert later["status"] == "pass"  # 1.2 still clears xla_speedup_min 1.1
    found = baseline.compare(base, later)
    assert [r.key for r in found] == ["xla/speedup"]
    regression = found[0]
    assert regression.meets_threshold is True
    assert regression.change == pytest.approx(1.2 / 1.42 - 1)
    assert "xla/speedup fell 15 %" in regression.message
    assert "still meets its threshold 1.1" in regression.message


def test_small_changes_and_improvements_are_not_regressions() -> None:
    base = full_run(3)
    assert baseline.compare(base, full_run(5, scale=0.95)) == []  # -5 % < 10 %
    assert baseline.compare(base, full_run(6, scale=1.3)) == []


def test_margin_is_overridable_globally_and_per_figure() -> None:
    base, later = full_run(3), full_run(5, scale=0.95)
    assert len(baseline.compare(base, later, margin=0.04)) == 7  # every judged figure fell 5 %
    only = baseline.compare(base, later, margins={"xla/speedup": 0.01})
    assert [r.key for r in only] == ["xla/speedup"]


def test_bad_margin_is_refused_with_the_fix() -> None:
    with pytest.raises(baseline.BaselineError, match=r"0\.10 for 10 %"):
        baseline.compare(full_run(3), full_run(4), margin=10)


def test_quick_runs_are_not_compared_with_a_full_baseline() -> None:
    quick = ff.document(
        "gpu-a", started_at=ff.when(8), workloads=ff.gpu_workloads(0.5), tier="quick"
    )
    assert baseline.compare(full_run(3), quick) == []


def test_not_applicable_figures_are_never_regressions() -> None:
    cpu = ff.recorded("validate-local-quick.json")
    slower = json.loads(json.dumps(cpu))
    for workload in slower["workloads"]:
        workload["metrics"] = {
            k: v / 3 if isinstance(v, float) else v for k, v in workload["metrics"].items()
        }
    slower["run_id"] += "-later"
    assert baseline.compare(cpu, slower) == []


def test_slowdown_is_compared_as_a_difference() -> None:
    def pipeline(slowdown: float) -> dict:
        work = ff.workload(
            "input_pipeline",
            {"tuned_slowdown": slowdown},
            {"input_pipeline_max_slowdown": 0.5},
            {"tuned_slowdown": "pass"},
        )
        return ff.document("gpu-a", started_at=ff.when(3 + int(slowdown * 100)), workloads=[work])

    assert baseline.compare(pipeline(0.02), pipeline(0.05)) == []  # x2.5 but only +0.03
    found = baseline.compare(pipeline(0.02), pipeline(0.2))
    assert [r.key for r in found] == ["input_pipeline/tuned_slowdown"]
    assert "rose by +0.18" in found[0].message


def test_write_refuses_a_run_that_cannot_be_a_baseline(tmp_path: Path) -> None:
    with pytest.raises(baseline.BaselineError, match="only a passing full validation"):
        baseline.write_baseline(
            tmp_path / "b.json", full_run(2, failing=("driver_packages_locked",))
        )


def test_unreadable_baseline_says_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("{not json")
    with pytest.raises(baseline.BaselineError, match="delete it"):
        baseline.load_baseline(path)
    assert baseline.load_baseline(tmp_path / "absent.json") is None
