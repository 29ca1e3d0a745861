"""The results' vendor section (schema_version 3): built from recorded dcgmi and nccl-tests
outputs, checked, read from older documents, and shown in the table, JUnit, HTML and textfile.

The dcgmi and nccl-tests outputs are recorded real ones (tests/fixtures/dcgm, nccl_tests); the
documents around them are assembled here with gpufleet's own functions (new_document), except
the recorded old-version documents of tests/fixtures/results.
"""

from __future__ import annotations

import copy
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from gpufleet.inventory import InventoryHost
from gpufleet.parsers import parse_dcgm_diag, parse_nccl_tests
from gpufleet.report import prometheus
from gpufleet.report.schema import ResultsSchemaError, new_document, summarize, validate_results
from gpufleet.report.terminal import vendor_table
from gpufleet.report.vendor_section import (
    latest_vendor,
    nccl_busbw,
    summary_properties,
    vendor_of,
)
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.results import merge_junit
from gpufleet.vendor import figure_of, judge_dcgm, judge_nccl
from gpufleet.vendor.section import dcgm_section, nccl_section
from tests.unit import fleet_factory as ff

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
A100_RUN = "a100-8gpu-old-header-nccl-info.txt"  # 8x A100-SXM4-40GB, 34 sizes up to 8 GiB
WHERE = {"gpu_model": "NVIDIA A100-SXM4-40GB", "gpu_count": 8, "interconnect": "nvlink"}


def dcgm_part(name: str = "dcgm4-gb10-r1-software-fail.json", rc: int = 226) -> dict:
    result = parse_dcgm_diag((FIXTURES / "dcgm" / name).read_text(), rc)
    return dcgm_section(judge_dcgm(result, level=1), level=1, result=result)


def nccl_part(name: str = A100_RUN) -> dict:
    parsed = parse_nccl_tests((FIXTURES / "nccl_tests" / name).read_text())
    figure = figure_of(parsed, 0)
    return nccl_section(judge_nccl(figure, **WHERE), parsed=parsed, figure=figure, **WHERE)


def document(host: str = "gpu-a", tier: str = "full", **vendor: Any) -> dict[str, Any]:
    check = {"name": "host_state::os_supported", "status": "pass", "message": "", "figures": {}}
    return new_document(
        host=host,
        run_id=f"20261201T0{'3' if tier == 'full' else '4'}0000Z-abc123",
        started_at=f"2026-12-01T0{'3' if tier == 'full' else '4'}:00:00+00:00",
        finished_at="2026-12-01T05:00:00+00:00",
        tier=tier,
        target=f"ssh://{host}",
        spec={},
        checks=[check],
        workloads=[],
        gpu_health=None,
        vendor=vendor,
    )


def metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        f.name: [(dict(s.labels), s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


# ------------------------------------------------------------------- shape and old documents


def test_a_version_3_document_holds_dcgm_and_nccl_tests_in_one_place():
    doc = json.loads(json.dumps(document(dcgm=dcgm_part(), nccl_tests=nccl_part())))
    validate_results(doc)
    assert doc["schema_version"] == 3
    dcgm, nccl = doc["vendor"]["dcgm"], doc["vendor"]["nccl_tests"]
    assert (dcgm["level"], dcgm["overall"], dcgm["error"]) == (1, "fail", None)
    assert {"name": "software", "gpu": "0", "status": "fail"}.items() <= dcgm["tests"][0].items()
    assert nccl["busbw_at_largest_gbps"] == 235.26 and nccl["avg_busbw_gbps"] == 68.4048
    assert nccl["largest_size_bytes"] == 8 << 30 and nccl["wrong"] == 0
    assert len(nccl["sizes"]) == 34 and nccl["sizes"][-1]["busbw_gbps"] == 235.26
    assert nccl["floor"]["busbw_gbps"] == 180.0 and "nccl-tests#149" in nccl["floor"]["source"]
    assert nccl["status"] == "pass"
    assert nccl_busbw(doc) == 235.26


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda v: v["dcgm"]["tests"][0].update(status="ok"), r"tests\[0\].status: 'ok'"),
        (lambda v: v["dcgm"].update(status="great"), "vendor.dcgm.status"),
        (lambda v: v["dcgm"]["tests"][0].update(gpu=0), r"tests\[0\].gpu: unexpected int"),
        (lambda v: v["nccl_tests"].update(busbw_at_largest_gbps="fast"), "busbw_at_largest"),
        (lambda v: v["nccl_tests"]["sizes"][0].pop("size_bytes"), r"sizes\[0\].size_bytes"),
        (lambda v: v["nccl_tests"]["floor"].pop("source"), "floor.source"),
        (lambda v: v.pop("nccl_tests"), "missing 'nccl_tests'"),
    ],
)
def test_a_vendor_section_of_the_wrong_shape_is_named(mutate, message):
    doc = copy.deepcopy(document(dcgm=dcgm_part(), nccl_tests=nccl_part()))
    mutate(doc["vendor"])
    with pytest.raises(ResultsSchemaError, match=message):
        validate_results(doc)


@pytest.mark.parametrize("name", ["validate-local-quick.json", "periodic-local-quick.json"])
def test_recorded_version_1_documents_are_still_read(name):
    doc = ff.recorded(name)
    assert doc["schema_version"] == 1 and "vendor" not in doc
    validate_results(doc)
    assert vendor_of(doc) == {"dcgm": None, "nccl_tests": None}
    assert vendor_table(doc) is None
    assert "gpufleet_nccl_busbw_gbps{" not in prometheus.render(doc)


def old_document_with_vendor_checks() -> dict[str, Any]:
    """A recorded version-1 document given the two checks a version-2 suite wrote on a GPU
    host (their figures are the gates' own, from the recorded runs)."""
    doc = ff.recorded("validate-local-quick.json")
    parsed = parse_nccl_tests((FIXTURES / "nccl_tests" / A100_RUN).read_text())
    verdict = judge_nccl(figure_of(parsed, 0), **WHERE)
    doc["checks"].append(
        {"name": "vendor_diagnostics::nccl_allreduce", "status": "pass",
         "message": verdict.reason, "figures": verdict.figures, "duration_s": 60.0}
    )  # fmt: skip
    doc["checks"].append(
        {"name": "vendor_diagnostics::dcgm_diag", "status": "skipped",
         "message": "no NVIDIA GPU on this host", "figures": {}, "duration_s": 0.0}
    )  # fmt: skip
    doc["summary"] = summarize(doc["checks"])
    return doc


def test_an_old_documents_vendor_checks_stand_for_the_section():
    doc = old_document_with_vendor_checks()
    validate_results(doc)
    section = vendor_of(doc)
    assert section["nccl_tests"]["busbw_at_largest_gbps"] == 235.26
    assert section["nccl_tests"]["floor"]["busbw_gbps"] == 180.0
    assert section["nccl_tests"]["from"] == "checks"
    assert (section["dcgm"]["status"], section["dcgm"]["reason"]) == (
        "skip",
        "no NVIDIA GPU on this host",
    )
    assert nccl_busbw(doc) == 235.26
    samples = metrics(prometheus.render(doc))["gpufleet_nccl_busbw_gbps"]
    assert samples == [({"host": "@local", "size": str(8 << 30)}, 235.26)]


def test_the_html_report_renders_an_old_documents_vendor_checks(tmp_path):
    from gpufleet.report.fleet import load_fleet
    from gpufleet.report.html import render_html

    doc = old_document_with_vendor_checks()
    ff.write(tmp_path, {**doc, "host": "old-host"})
    html = render_html(load_fleet(tmp_path))
    assert "<code>dcgmi diag</code>" in html  # no level recorded before version 3
    assert "busbw 235 GB/s at 8589934592 B" in html and "floor 180 GB/s" in html


# --------------------------------------------------------------------------- the reports


def test_the_textfile_has_busbw_per_size_and_dcgm_gauges():
    doc = document(dcgm=dcgm_part(), nccl_tests=nccl_part())
    found = metrics(prometheus.render(doc))
    busbw = {labels["size"]: v for labels, v in found["gpufleet_nccl_busbw_gbps"]}
    # 34 rows, two of them size 0: one series per size (a repeated label set is invalid)
    assert len(busbw) == 33 == len(found["gpufleet_nccl_busbw_gbps"])
    assert busbw[str(8 << 30)] == 235.26 and busbw["0"] == 0
    assert all(labels["host"] == "gpu-a" for labels, _ in found["gpufleet_nccl_busbw_gbps"])
    assert found["gpufleet_nccl_busbw_floor_gbps"] == [
        ({"host": "gpu-a", "metric": "largest"}, 180.0)
    ]
    assert found["gpufleet_nccl_wrong"] == [({"host": "gpu-a"}, 0.0)]
    result = {labels["status"]: v for labels, v in found["gpufleet_dcgm_diag_result"]}
    assert result["fail"] == 1 and result["pass"] == 0 and "no_floor" not in result
    passed = found["gpufleet_dcgm_diag_test_passed"]
    assert passed == [({"host": "gpu-a", "level": "1", "test": "software", "gpu": "0"}, 0.0)]


def test_a_level_1_pass_on_8_gpus_gives_one_gauge_per_test_and_gpu():
    doc = document(dcgm=dcgm_part("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0))
    found = metrics(prometheus.render(doc))
    assert len(found["gpufleet_dcgm_diag_test_passed"]) == 80
    assert all(v == 1 for _, v in found["gpufleet_dcgm_diag_test_passed"])
    counts = {labels["status"]: v for labels, v in found["gpufleet_dcgm_diag_tests"]}
    assert counts == {"pass": 80, "fail": 0, "skip": 0, "warn": 0}
    assert "gpufleet_nccl_busbw_gbps" not in found


def test_vendor_label_values_are_escaped_as_the_text_format_asks():
    awkward = 'gpu "a" \\ b\nc'
    dcgm = dcgm_part()
    dcgm["tests"][0]["name"] = 'soft"ware\\x\ny'
    text = prometheus.render(document(host=awkward, dcgm=dcgm, nccl_tests=nccl_part()))
    assert 'host="gpu \\"a\\" \\\\ b\\nc"' in text
    assert 'test="soft\\"ware\\\\x\\ny"' in text
    found = metrics(text)
    assert {labels["host"] for labels, _ in found["gpufleet_nccl_busbw_gbps"]} == {awkward}
    assert found["gpufleet_dcgm_diag_test_passed"][0][0]["test"] == 'soft"ware\\x\ny'


def test_the_terminal_shows_the_failing_gpu_and_the_floor_with_its_source():
    doc = document(dcgm=dcgm_part(), nccl_tests=nccl_part())
    console = Console(file=io.StringIO(), width=200)
    table = vendor_table(doc)
    assert table is not None
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "dcgmi diag -r 1" in text and "software" in text and "GPU 0" in text
    assert "busbw 235 GB/s at 8589934592 B" in text and "floor 180 GB/s" in text
    assert "nccl-tests#149" in text


def test_the_junit_carries_the_vendor_figures(tmp_path):
    host = InventoryHost("gpu-a", "ssh", "gpu-a")
    run = HostRun(host, "gpufleet-000", *(tmp_path / n for n in ("e", "r", "j", "l")))
    run.document = document(dcgm=dcgm_part(), nccl_tests=nccl_part())
    merge_junit([run], tmp_path / "junit.xml")
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(tmp_path / "junit.xml").getroot().iter("property")
    }
    assert props["gpufleet_dcgm_status"] == "fail" and props["gpufleet_dcgm_failed_tests"] == "1"
    assert props["gpufleet_nccl_busbw_at_largest_gbps"] == "235.26"
    assert props["gpufleet_nccl_floor_gbps"] == "180.0"
    assert props["gpufleet_nccl_wrong"] == "0"
    assert dict(summary_properties(run.document)) == {
        k: v for k, v in props.items() if k.startswith(("gpufleet_dcgm", "gpufleet_nccl"))
    }


def test_the_html_report_keeps_the_last_full_runs_nccl_figure_next_to_the_newest_dcgm(tmp_path):
    from gpufleet.report.fleet import load_fleet
    from gpufleet.report.html import render_html

    full = document(
        tier="full", dcgm=dcgm_part("dcgm3-t400-r3-skip.json", 0), nccl_tests=nccl_part()
    )
    quick = document(tier="quick", dcgm=dcgm_part())
    for doc in (full, quick):
        ff.write(tmp_path, doc)
    runs = [full, quick]
    found = latest_vendor(runs)
    assert found["dcgm"]["run_id"] == quick["run_id"]
    assert found["nccl_tests"]["run_id"] == full["run_id"]
    html = render_html(load_fleet(tmp_path))
    assert "Vendor diagnostics" in html and "dcgmi diag -r 1" in html
    assert "busbw 235 GB/s at 8589934592 B" in html and "floor 180 GB/s" in html
    assert f"run {full['run_id']}" in html
    assert "Persistence mode for GPU 0 is disabled" in html


def test_a_recorded_version_3_periodic_run_and_its_textfile_agree():
    # Real outputs of `python -m validation.periodic` on a GPU-less machine (SOURCES.md).
    doc = ff.recorded("periodic-local-gemm-v3.json")
    validate_results(doc)
    assert doc["schema_version"] == 3
    dcgm = doc["vendor"]["dcgm"]
    assert (dcgm["level"], dcgm["status"], dcgm["overall"]) == (1, "skip", None)
    assert dcgm["reason"].startswith("no NVIDIA GPU")
    assert doc["vendor"]["nccl_tests"] is None
    recorded = (FIXTURES / "results" / "periodic-local-gemm-v3.prom").read_text()
    for text in (recorded, prometheus.render(doc)):
        found = metrics(text)
        result = {labels["status"]: v for labels, v in found["gpufleet_dcgm_diag_result"]}
        assert result["skip"] == 1 and sum(result.values()) == 1
        assert {labels["host"] for labels, _ in found["gpufleet_dcgm_diag_result"]} == {doc["host"]}
        assert "gpufleet_nccl_busbw_gbps" not in found


def test_the_real_suite_on_this_gpu_less_machine_says_why_dcgm_did_not_run(tmp_path):
    # The validation suite itself (pytest + testinfra, local://) on this machine, which has no
    # NVIDIA GPU: the DCGM check is skipped by the `gpu` fixture before its body runs, and the
    # results' vendor section still carries that reason; nccl-tests stays null.
    import subprocess
    import sys

    from validation.verdicts.expectations import Expectations

    repo = Path(__file__).resolve().parents[2]
    expectations = tmp_path / "exp.json"
    expectations.write_text(
        json.dumps(Expectations(host="h", python=sys.executable, target="local://").to_dict())
    )
    results = tmp_path / "results.json"
    command = [sys.executable, "-m", "pytest", str(repo / "validation"), "--hosts=local://"]
    command += [f"--expectations={expectations}", f"--results-json={results}", "--tier=full"]
    command += ["-k", "dcgm_diag or nccl_allreduce", "-p", "no:cacheprovider", "-q"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    document = json.loads(results.read_text())
    validate_results(document)
    checks = {c["name"]: c for c in document["checks"]}
    dcgm_check = checks["vendor_diagnostics::dcgm_diag"]
    assert dcgm_check["status"] == "skipped"
    dcgm = document["vendor"]["dcgm"]
    assert dcgm["status"] == "skip" and dcgm["reason"] == dcgm_check["message"]
    assert "GPU" in dcgm["reason"] and dcgm["tests"] == [] and "from" not in dcgm
    assert document["vendor"]["nccl_tests"] is None
