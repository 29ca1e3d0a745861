"""`gpufleet report`'s baseline is that of the latest run's tier, never the latest run itself
(review top-15 #13: it read only baseline.json and compared a host's only run with itself)."""

from __future__ import annotations

from pathlib import Path

from gpufleet.report.fleet import load_host
from gpufleet.validate.baseline import record_run
from tests.unit import fleet_factory as ff


def quick_run(day: int, xla: float = 1.42) -> dict:
    workloads = ff.gpu_workloads(xla=xla)
    return ff.document("gpu-q", started_at=ff.when(day), workloads=workloads, tier="quick")


def test_a_quick_run_is_judged_against_baseline_quick(tmp_path: Path) -> None:
    for day in range(1, 4):
        doc = quick_run(day)
        ff.write(tmp_path, doc)
        assert record_run(tmp_path, doc) == tmp_path / "gpu-q" / "baseline-quick.json"
    ff.write(tmp_path, quick_run(9, xla=1.10))
    report = load_host(tmp_path / "gpu-q", margin=0.1)
    assert report is not None and report.baseline_note == "baseline-quick.json"
    assert report.baseline is not None and report.baseline.get("tier") == "quick"


def test_the_only_run_is_not_its_own_baseline(tmp_path: Path) -> None:
    ff.write(tmp_path, quick_run(1))
    report = load_host(tmp_path / "gpu-q", margin=0.1)
    assert report is not None and report.baseline is None and report.regressions == []


def test_the_stand_in_says_its_tier(tmp_path: Path) -> None:
    for day in (1, 2):
        ff.write(tmp_path, quick_run(day))
    report = load_host(tmp_path / "gpu-q", margin=0.1)
    assert report is not None
    assert report.baseline_note == "first passing quick run (no baseline-quick.json yet)"
