"""gpufleet.report.prometheus: the textfile parses, says what the document says, is atomic."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet import health
from gpufleet.parsers import parse_nvidia_smi_xml
from gpufleet.report import prometheus
from tests.unit import fleet_factory as ff

ROOT = Path(__file__).resolve().parents[2]


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Family name -> [(labels, value)], checking that every family is a gauge with help."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        assert family.documentation, family.name
        found[family.name] = [(dict(s.labels), s.value) for s in family.samples]
    return found


def value(samples: list[tuple[dict[str, str], float]], **labels: str) -> float:
    matches = [v for found, v in samples if all(found.get(k) == x for k, x in labels.items())]
    assert len(matches) == 1, (labels, samples)
    return matches[0]


def test_recorded_validate_run_parses_and_matches_its_checks() -> None:
    doc = ff.recorded("validate-local-quick.json")
    metrics = parse(prometheus.render(doc))
    for check in doc["checks"]:
        status = metrics["gpufleet_check_status"]
        assert value(status, check=check["name"], status=check["status"]) == 1
        if check["status"] == "skipped":
            continue
        passed = value(metrics["gpufleet_check_passed"], check=check["name"])
        assert passed == (1 if check["status"] == "pass" else 0)
    assert value(metrics["gpufleet_run_success"]) == (1 if doc["status"] == "pass" else 0)
    counts = {labels["status"]: v for labels, v in metrics["gpufleet_checks"]}
    assert counts == {k: float(v) for k, v in doc["summary"].items()}
    xla = next(w for w in doc["workloads"] if w["workload"] == "xla")
    speedup = value(metrics["gpufleet_speedup_ratio"], workload="xla", variant="jit_compile")
    assert speedup == pytest.approx(xla["metrics"]["speedup"])
    assert value(
        metrics["gpufleet_speedup_threshold_ratio"], workload="xla", variant="jit_compile"
    ) == pytest.approx(xla["config"]["thresholds"]["xla_speedup_min"])


def test_speedups_and_scaling_efficiency_of_a_gpu_host() -> None:
    doc = ff.document("gpu-a", started_at=ff.when(20), workloads=ff.gpu_workloads(xla=1.37))
    metrics = parse(prometheus.render(doc))
    speedups = metrics["gpufleet_speedup_ratio"]
    assert value(speedups, workload="mixed_precision", variant="mixed_float16") == 2.6
    assert value(speedups, workload="xla", variant="jit_compile") == pytest.approx(1.37)
    scaling = metrics["gpufleet_scaling_efficiency_ratio"]
    assert value(scaling, workload="mirrored", variant="all_gpus") == pytest.approx(0.93)
    assert value(metrics["gpufleet_scaling_efficiency_threshold_ratio"], workload="mirrored") == 0.8
    figures = metrics["gpufleet_workload_figure"]
    assert value(figures, workload="gemm", metric="fp16_tflops") == 610.0
    verdicts = metrics["gpufleet_workload_verdict"]
    assert value(verdicts, workload="xla", verdict="pass") == 1
    assert value(verdicts, workload="xla", verdict="fail") == 0


@pytest.mark.parametrize("fixture", ["tesla-t4-515.xml", "a100-sxm4-535-mig.xml"])
def test_gpu_health_figures_from_recorded_nvidia_smi(fixtures_dir: Path, fixture: str) -> None:
    smi = parse_nvidia_smi_xml((fixtures_dir / "nvidia_smi" / fixture).read_text())
    summary = health.gpu_summary(smi)
    section = {
        "gpus": summary,
        "findings": [f.to_dict() for f in health.evaluate_idle(smi, len(summary) + 1)],
    }
    doc = ff.document("gpu-b", started_at=ff.when(21), workloads=[], health=section)
    metrics = parse(prometheus.render(doc))
    assert value(metrics["gpufleet_gpu_count"]) == len(summary)
    assert value(metrics["gpufleet_gpu_health_findings"], check="gpu_count", severity="fail") == 1
    for index, gpu in enumerate(summary):
        if gpu["temperature_c"] is not None:
            temperature = value(metrics["gpufleet_gpu_temperature_celsius"], gpu=str(index))
            assert temperature == gpu["temperature_c"]
        if gpu["power_draw_w"] is not None:
            assert value(metrics["gpufleet_gpu_power_draw_watts"], gpu=str(index)) == pytest.approx(
                gpu["power_draw_w"]
            )
        if gpu["ecc_uncorrected_volatile"] is not None:
            ecc = value(metrics["gpufleet_gpu_ecc_uncorrected_volatile_errors"], gpu=str(index))
            assert ecc == gpu["ecc_uncorrected_volatile"]
        reasons = {
            labels["reason"]
            for labels, v in metrics.get("gpufleet_gpu_clock_event_reason_active", [])
            if labels["gpu"] == str(index) and v == 1
        }
        assert reasons == {health.reason_name(r) for r in gpu["clock_event_reasons_active"]}


def test_throttled_gpu_and_pending_remap_show() -> None:
    section = ff.gpu_health(ecc=3, pending=True)
    section["gpus"][1]["clock_event_reasons_active"] = ["hw_thermal_slowdown", "sw_power_cap"]
    doc = ff.document("gpu-c", started_at=ff.when(22), workloads=[], health=section)
    metrics = parse(prometheus.render(doc))
    assert value(metrics["gpufleet_gpu_throttled"], gpu="1") == 1
    assert value(metrics["gpufleet_gpu_throttled"], gpu="0") == 0
    assert value(metrics["gpufleet_gpu_remapped_rows_pending"], gpu="0") == 1
    assert value(metrics["gpufleet_gpu_ecc_uncorrected_volatile_errors"], gpu="0") == 3


def test_label_values_are_escaped() -> None:
    awkward = 'host_state::odd "quoted" \\ back\nslash'
    check = {"name": awkward, "status": "fail", "message": "", "figures": {}, "duration_s": 0.0}
    doc = ff.checks_document([check], started_at="2026-11-30T08:00:00+00:00", target="local://")
    text = prometheus.render(doc)
    assert (
        "\n" + 'gpufleet_check_passed{check="host_state::odd \\"quoted\\" \\\\ back\\nslash"} 0'
        in text
    )
    metrics = parse(text)
    assert value(metrics["gpufleet_check_passed"], check=awkward) == 0


def test_values_format_like_the_text_format() -> None:
    assert prometheus.format_value(float("nan")) == "NaN"
    assert prometheus.format_value(float("inf")) == "+Inf"
    assert prometheus.format_value(float("-inf")) == "-Inf"
    assert prometheus.format_value(3.0) == "3"
    assert prometheus.format_value(0.25) == "0.25"


def test_last_success_carries_over_a_failed_run(tmp_path: Path) -> None:
    good = ff.document("gpu-a", started_at=ff.when(20), workloads=ff.gpu_workloads())
    bad = ff.document(
        "gpu-a",
        started_at=ff.when(21),
        workloads=ff.gpu_workloads(),
        failing=("driver_packages_locked",),
    )
    path = prometheus.write_for_document(bad, tmp_path)
    first = parse(path.read_text())
    assert value(first["gpufleet_last_success_timestamp_seconds"]) == 0  # none passed yet
    prometheus.write_for_document(good, tmp_path)
    passed_at = prometheus.timestamp(good["finished_at"])
    assert value(parse(path.read_text())["gpufleet_last_success_timestamp_seconds"]) == passed_at
    prometheus.write_for_document(bad, tmp_path)
    after = parse(path.read_text())
    assert value(after["gpufleet_last_success_timestamp_seconds"]) == passed_at
    assert value(after["gpufleet_last_run_timestamp_seconds"]) == prometheus.timestamp(
        bad["finished_at"]
    )
    assert value(after["gpufleet_run_success"]) == 0


def test_write_is_atomic_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gpufleet.prom"
    prometheus.write_textfile(path, "old 1\n")
    assert oct(path.stat().st_mode & 0o777) == "0o644"

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        prometheus.write_textfile(path, "new 1\n")
    assert path.read_text() == "old 1\n"  # the collector never sees a half-written file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpufleet.prom"]


def test_previous_last_success_ignores_missing_and_garbage(tmp_path: Path) -> None:
    assert prometheus.previous_last_success(tmp_path / "absent.prom") is None
    junk = tmp_path / "junk.prom"
    junk.write_text("gpufleet_last_success_timestamp_seconds not-a-number\n")
    assert prometheus.previous_last_success(junk) is None
    junk.write_text("gpufleet_last_success_timestamp_seconds 1.7e9\n")
    assert prometheus.previous_last_success(junk) == 1.7e9


def test_grafana_dashboard_uses_only_metrics_the_textfile_has() -> None:
    dashboard = json.loads((ROOT / "dashboards" / "gpufleet-grafana.json").read_text())
    section = ff.gpu_health(ecc=1, pending=True)
    section["gpus"][0]["remapped_rows_failure"] = True
    section["gpus"][0]["clock_event_reasons_active"] = ["hw_slowdown"]
    doc = ff.document("gpu-a", started_at=ff.when(20), workloads=ff.gpu_workloads(), health=section)
    written = set(parse(prometheus.render(doc)))
    used = set()
    ids = []
    for panel in dashboard["panels"]:
        ids.append(panel["id"])
        for target in panel["targets"]:
            used |= set(re.findall(r"gpufleet_[a-z_]+", target["expr"]))
    used |= set(re.findall(r"gpufleet_[a-z_]+", json.dumps(dashboard["templating"])))
    assert used and used <= written, used - written
    assert len(ids) == len(set(ids))
    assert {"gpufleet_speedup_ratio", "gpufleet_scaling_efficiency_ratio"} <= used
    assert "gpufleet_last_success_timestamp_seconds" in used
