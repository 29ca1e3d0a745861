"""The periodic check as its timer starts it, with the real xla workload (TensorFlow on the
CPU): the run's document, its Prometheus textfile and the workload's log. Moved here from the
unit tier (issue 30, H13): it is a TensorFlow run, the workloads tier's kind of test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.report.schema import validate_results

pytestmark = pytest.mark.workload

ROOT = Path(__file__).resolve().parents[2]


def test_the_periodic_runner_with_a_real_workload(tmp_path: Path) -> None:
    out, prom = tmp_path / "out", tmp_path / "prom"
    command = [sys.executable, "-m", "validation.periodic", "--out", str(out)]
    command += ["--textfile-dir", str(prom), "--workloads", "xla"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "latest.json").read_text())
    validate_results(doc)
    assert doc["workloads"][0]["workload"] == "xla"
    assert doc["workloads"][0]["verdict"]["status"] == "pass"  # correctness decides on a CPU
    metrics = {
        f.name: f.samples
        for f in text_string_to_metric_families(prom.joinpath("gpufleet.prom").read_text())
    }
    assert metrics["gpufleet_check_passed"][0].labels == {"check": "workloads::xla"}
    assert (out / "logs" / "xla.log").read_text().count("step=") >= 3
