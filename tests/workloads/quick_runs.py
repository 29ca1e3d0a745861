"""Running one workload as a host runs it, for the workloads tier's modules: its quick tier
once per session (`quick_result`), or with other arguments (`run_workload`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_workload(name: str, *extra: str, tmp: Path) -> tuple[int, dict[str, Any], dict, float]:
    """`python -m validation.workloads.NAME --quick --json PATH`: the exit status, the printed
    document, the --json file's document ({} when it wrote none) and the wall seconds. XLA's
    cache is a fresh folder, ``tmp/xla`` (tests/workloads/test_warm_cpu.py reads it)."""
    out = tmp / f"{name}.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # CPU even on a GPU machine
    env["TF_XLA_FLAGS"] = f"--tf_xla_persistent_cache_directory={tmp / 'xla'}"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", f"validation.workloads.{name}", "--quick", "--json", str(out),
         *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert proc.stdout.strip(), f"{name} printed nothing; stderr:\n{proc.stderr[-3000:]}"
    printed = json.loads(proc.stdout)
    written = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, printed, written, seconds


@cache
def quick_result(name: str) -> tuple[int, dict[str, Any], dict, float, str]:
    """`run_workload` of ``name`` with no extra argument, run once per process: also the
    folder it ran in (its XLA cache is ``FOLDER/xla``)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"workload-{name}-"))
    status, printed, written, seconds = run_workload(name, tmp=tmp)
    return status, printed, written, seconds, str(tmp)
