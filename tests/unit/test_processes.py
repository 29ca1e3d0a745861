"""validation.verdicts.processes: a workload's speed checks judged over every fresh process;
NVML thinning; the unproven status in JUnit and the textfile."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from gpufleet.inventory import host_from_dict
from gpufleet.report import prometheus
from gpufleet.report.schema import new_document
from gpufleet.validate.hostrun import HostRun
from gpufleet.validate.results import merge_junit
from tests.unit import fleet_factory as ff
from validation.host.nvml_sampler import Sample, thin
from validation.verdicts.harness import judge_runs
from validation.verdicts.processes import merge_processes, speed_at_stake


def process_doc(ratio: float, seed: int, *, status: str = "inconclusive") -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    pairs = [
        [float(np.exp(rng.normal(0, 0.01))), float(np.exp(rng.normal(0, 0.01)) / ratio)]
        for _ in range(12)
    ]
    return {
        "workload": "xla",
        "schema_version": 1,
        "metrics": {"speedup": ratio, "loss_max_relative_difference": 1e-6 * (seed + 1)},
        "checks": [
            {"name": "losses_match", "kind": "correctness", "status": "pass", "reason": "ok"},
            {
                "name": "xla_speedup",
                "kind": "speed",
                "status": status,
                "reason": "one process",
                "evidence": {
                    "type": "pairs",
                    "metric": "speedup",
                    "invert": False,
                    "threshold": 1.1,
                    "between_run_sd": None,
                    "runs": [pairs],
                },
            },
        ],
        "verdict": {"status": status, "reason": "one process"},
    }


def test_speed_checks_are_judged_over_all_processes() -> None:
    docs = [process_doc(1.5, seed) for seed in range(3)]
    assert speed_at_stake(docs[0])
    merged = merge_processes(docs)
    check = next(c for c in merged["checks"] if c["name"] == "xla_speedup")
    runs = [d["checks"][1]["evidence"]["runs"][0] for d in docs]
    assert check["status"] == judge_runs(runs, 1.1).status == "pass"
    assert check["judgement"]["processes"] == 3 and "evidence" not in check
    assert merged["verdict"]["status"] == "pass" and merged["processes"] == 3
    assert merged["metrics"]["speedup"] == check["judgement"]["estimate"]["median"]
    assert merged["metrics"]["loss_max_relative_difference"] == 2e-6  # median of the others
    assert [v["status"] for v in merged["process_verdicts"]] == ["inconclusive"] * 3


def test_a_failed_check_in_any_process_fails_and_a_crash_is_kept() -> None:
    docs = [process_doc(1.5, seed) for seed in range(3)]
    docs[1]["checks"][0]["status"] = "fail"
    assert merge_processes(docs)["verdict"]["status"] == "fail"
    crashed = {"workload": "xla", "checks": [], "verdict": {"status": "fail", "reason": "OOM"}}
    merged = merge_processes([process_doc(1.5, 0), crashed])
    assert merged["verdict"] == {"status": "fail", "reason": "OOM"}


def test_not_applicable_speed_checks_need_one_process() -> None:
    doc = process_doc(1.5, 0, status="not_applicable")
    assert not speed_at_stake(doc)
    assert merge_processes([doc]) == {**doc, "processes": 1}


def test_nvml_samples_are_thinned_to_one_per_window_and_skip_phase_changes() -> None:
    samples = [Sample(t / 10, "gpu0", "tuned", 50.0 + t, 1.0) for t in range(0, 60)]
    changes = [(0.0, "tuned"), (3.0, "naive"), (3.05, "tuned")]
    kept = thin(samples, changes, "tuned", "gpu0", 1.0)
    times = [round(s.time_s, 1) for s in kept]
    assert times == [1.0, 2.0, 4.1, 5.1]
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(times))


def unproven_doc() -> dict[str, Any]:
    doc = ff.document("gpu-a", started_at=ff.when(3), workloads=ff.gpu_workloads())
    checks = [*doc["checks"]]
    checks[-1] = {**checks[-1], "status": "inconclusive", "message": "inconclusive: noisy"}
    return new_document(
        host="gpu-a",
        run_id="r1",
        started_at=doc["started_at"],
        tier="full",
        target="ssh://gpu-a",
        spec={},
        checks=checks,
        workloads=doc["workloads"],
        gpu_health=None,
    )


def test_unproven_shows_in_the_textfile() -> None:
    doc = unproven_doc()
    assert doc["status"] == "unproven"
    text = prometheus.render(doc)
    assert "gpufleet_run_unproven 1" in text and "gpufleet_run_success 0" in text
    passing = ff.document("gpu-a", started_at=ff.when(3), workloads=ff.gpu_workloads())
    assert "gpufleet_run_unproven 0" in prometheus.render(passing)


def test_unproven_shows_in_the_junit(tmp_path: Path) -> None:
    host = host_from_dict({"name": "gpu-a", "data": {}})
    run = HostRun(
        host, "gpufleet-000", tmp_path / "e", tmp_path / "r", tmp_path / "j.xml", tmp_path
    )
    run.document = unproven_doc()
    out = tmp_path / "junit.xml"
    merge_junit([run], out)
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    case = suite.find("testcase[@name='unproven']")
    assert case is not None and case.find("failure").get("type") == "unproven"
    status = suite.find("properties/property[@name='gpufleet_status']")
    assert status is not None and status.get("value") == "unproven"


def test_unproven_shows_in_the_terminal_table_and_the_html_report(tmp_path: Path) -> None:
    from rich.console import Console

    from gpufleet.report.fleet import load_fleet
    from gpufleet.report.html import render_html
    from gpufleet.report.terminal import print_report

    doc = unproven_doc()
    console = Console(width=200, record=True)
    print_report([doc], console)
    assert "unproven" in console.export_text()
    ff.write(tmp_path, doc)
    html = render_html(load_fleet(tmp_path))
    assert '<span class="badge unproven">unproven</span>' in html
    assert re.search(r"<b>1</b><span>unproven", html)
