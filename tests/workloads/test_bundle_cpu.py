"""The quick tier's one process (validation.workloads.bundle) on the CPU: one document each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation.verdicts.tiers import BUNDLED

pytestmark = pytest.mark.workload

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundle_writes_each_workloads_own_document(tmp_path: Path) -> None:
    names = list(BUNDLED["quick"])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    env["TF_XLA_FLAGS"] = f"--tf_xla_persistent_cache_directory={tmp_path / 'xla'}"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "validation.workloads.bundle", "--quick"),
            *("--json-dir", str(tmp_path / "docs"), "--workloads", ",".join(names)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == sorted(
        f"{n}.json" for n in names
    )
    for name in names:
        doc = json.loads((tmp_path / "docs" / f"{name}.json").read_text())
        assert doc["workload"] == name
        assert doc["verdict"]["status"] in ("pass", "not_applicable"), doc["verdict"]
        assert doc["config"]["xla_cache"]["directory"] == str(tmp_path / "xla")
        # Correctness checks ran and passed; speed is not judged on a CPU.
        kinds = {c["kind"]: c["status"] for c in doc["checks"] if c["kind"] == "correctness"}
        assert kinds and set(kinds.values()) == {"pass"}, doc["checks"]
    resnet = json.loads((tmp_path / "docs" / "resnet50.json").read_text())
    assert [d["name"] for d in resnet["devices"]] == ["/device:CPU:0"]  # single-device workload
    mirrored = json.loads((tmp_path / "docs" / "mirrored.json").read_text())
    assert len(mirrored["devices"]) == 2  # its two logical CPU devices
    assert (tmp_path / "xla").is_dir()
