"""The health check's record of its last Slurm round (validation.host.healthcheck.record_round)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from validation.host.healthcheck import record_round


def test_a_round_is_recorded_whole_and_replaces_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "run" / "gpufleet" / "healthcheck-last.json"
    record_round(path, "gfsb-h1", None, "node gfsb-h1 resumed")
    first = json.loads(path.read_text())
    record_round(path, "gfsb-h1", ["persistence", "inactive"], "node gfsb-h1 drained")
    second = json.loads(path.read_text())
    assert first["why"] == "node gfsb-h1 resumed" and first["failure"] is None
    assert second["failure"] == ["persistence", "inactive"]
    assert second["finished_at"] >= first["finished_at"] > 0
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left behind
