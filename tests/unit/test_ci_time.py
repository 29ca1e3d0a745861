"""benchmarks/ci_time.py reads what .ci/run leaves: phases, JUnit tiers, the sandbox's ups."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gpufleet.sandbox.control import record_up
from gpufleet.sandbox.state import HostState, SandboxState

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "ci_time.py"
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.unit.test_a" name="test_fast" time="0.5"/>
<testcase classname="tests.integration.test_deploy_e2e" name="test_first" time="240.0"/>
<testcase classname="tests.integration.test_deploy_e2e" name="test_broken" time="60.0">
<failure message="boom"/></testcase>
<testcase classname="tests.workloads.test_w" name="test_skip" time="0.0"><skipped/></testcase>
</testsuite></testsuites>
"""


def _ci_time():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ci_time", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_time"] = module
    spec.loader.exec_module(module)
    return module


def test_the_report_gives_phases_tiers_slowest_tests_and_ups(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "started").write_text("100\n")
    (artifacts / "phases.tsv").write_text("bootstrap\t90\t0\npytest\t1800\t1\n")
    (artifacts / "parts.tsv").write_text("sandbox-free\t480\t0\nintegration\t1500\t1\n")
    (artifacts / "junit-integration.xml").write_text(JUNIT)
    ups = tmp_path / "ups.jsonl"
    bare = HostState("gfsb-h1", "10.231.7.11")
    kept = HostState("gfsb-h2", "10.231.7.12", layers=["/s/hosts/gfsb-h2"])
    state = SandboxState(image="ubuntu22.04", os=["ubuntu", "22.04"], hosts=[bare, kept])
    record_up(state, 12.0, ups)
    text = _ci_time().report(artifacts, ups)
    assert "bootstrap                     1.5  0" in text
    assert "total                        31.5" in text
    assert "sandbox-free                  8.0  0" in text
    assert "integration                  25.0  1" in text
    assert "integration                   5.0      2  1 failure, 1 passed" in text
    assert "workloads                     0.0      1  1 skipped" in text
    slowest = text.split("slowest 20 tests")[1].splitlines()[1:3]
    assert slowest[0].endswith("tests.integration.test_deploy_e2e::test_first")
    assert slowest[1].endswith("test_broken (failure)")
    assert "sandbox: 1 up(s), 2 host(s): 1 bare" in text and "1 on a snapshot" in text


def test_ups_before_the_run_began_are_not_counted(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    ups = tmp_path / "ups.jsonl"
    ups.write_text('{"at": 5, "hosts": 3, "bare": ["a"], "seconds": 9}\n')
    (artifacts / "started").write_text("10\n")
    assert "sandbox:" not in _ci_time().report(artifacts, ups)
