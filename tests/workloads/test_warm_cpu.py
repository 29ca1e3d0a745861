"""XLA's warm-up on the CPU: after it, a real tier run in a new process compiles nothing new.

The warm-up (validation.workloads.warm) and the tier's run are separate processes, as on a
host after a deploy; the cache's entries (one file per key, in the folder of this host's GPU
set, validation.workloads.xla_cache.gpu_set_key) are counted before and after. On the CPU only the
xla workload compiles (its MLP and the tiny ResNet-50's XLA arm).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workloads.quick_runs import quick_result
from validation.workloads import xla_cache

pytestmark = pytest.mark.workload

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    env["TF_XLA_FLAGS"] = f"{xla_cache.FLAG}{cache}"
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_after_the_warm_up_the_tiers_run_adds_no_cache_entry(tmp_path: Path) -> None:
    cache = tmp_path / "xla"
    warm = _run(
        [
            *("validation.workloads.warm", "--tiers", "full", "--workloads", "xla"),
            *("--cache-dir", str(cache), "--marker-text", "gpufleet XLA warm-up: test"),
        ],
        cache,
    )
    assert warm.returncode == 0, warm.stderr[-3000:]
    report = json.loads(warm.stdout)
    key = xla_cache.gpu_set_key()  # the processes' own: gpus-none where no driver is loaded
    keyed = cache / key
    warmed = xla_cache.entries(keyed)
    assert report["warm_up"] is True and report["status"] == "warmed", report
    assert report["gpu_set"] == key
    assert (report["entries_before"], report["entries_after"]) == (0, len(warmed))
    assert len(warmed) == 2  # the MLP's step and the ResNet-50 XLA arm's
    assert sorted(p.name for p in cache.iterdir()) == sorted([key, xla_cache.MARKER])
    assert sorted(p.name for p in keyed.iterdir()) == warmed

    # The full tier's xla process, as the suite starts it, in a process of its own.
    out = tmp_path / "xla.json"
    real = _run(["validation.workloads.xla", "--json", str(out)], cache)
    assert real.returncode == 0, real.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["verdict"]["status"] == "pass", doc["verdict"]
    assert doc["config"]["xla_cache"]["directory"] == str(cache)
    assert doc["config"]["xla_cache"]["gpu_set"] == key
    assert doc["config"]["xla_trace_marks"] == {"aligned": 2, "missed": 0}
    assert xla_cache.entries(keyed) == warmed  # every key it compiled was the warm-up's
    assert (cache / xla_cache.MARKER).exists()  # nor did it find its set new

    # Without the warm-up the same steps are compiled (the CPU suite's run, a fresh cache):
    # the very entries the warm-up made.
    _, cold_doc, _, _, folder = quick_result("xla")
    assert cold_doc["verdict"]["status"] == "pass"
    assert xla_cache.entries(Path(folder) / "xla" / key) == warmed
