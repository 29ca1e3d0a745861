"""The periodic runs against their tier's baseline on the host: gathered, then CUSUM-checked.

The host keeps ``OUT/baseline-quick.json`` (``OUT/baseline.json`` for the full tier, which is
where the monitoring stage copies the control node's): the first qualifying periodic runs
(gpufleet.validate.baseline.RUNS_WANTED) make it; every later run is judged with the
baseline's regression_verdict over the periodic history, and the state goes into the metrics.

Standard library and gpufleet's pure-Python parts only (runs with the environment's Python).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpufleet.report.schema import ResultsSchemaError, validate_results
from gpufleet.validate import baseline

# The names validation.periodic gives its results documents: <UTC time>-<6 hex>.json. Only
# these are its own (prune never touches another file in a shared results folder).
RUN_FILE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}\.json$")


def own_runs(results_dir: Path) -> list[Path]:
    """The periodic runner's results documents in ``results_dir``, oldest first."""
    if not results_dir.is_dir():
        return []
    return sorted(p for p in results_dir.iterdir() if RUN_FILE.match(p.name) and p.is_file())


def baseline_file(out: Path, tier: str) -> Path:
    """``OUT/baseline.json`` (full tier) or ``OUT/baseline-<tier>.json``."""
    return out / (baseline.BASELINE_NAME if tier == "full" else f"baseline-{tier}.json")


def _history(results_dir: Path, tier: str) -> list[dict[str, Any]]:
    documents = []
    for path in own_runs(results_dir):
        try:
            document = json.loads(path.read_text())
            validate_results(document)
        except (OSError, ValueError, ResultsSchemaError):
            continue
        if document.get("tier") == tier:
            documents.append(document)
    return documents


def regression_state(document: dict[str, Any], out: Path, results_dir: Path) -> dict[str, Any]:
    """Add ``document`` to its tier's baseline while that is gathering; else judge the history.

    Returns ``{"state": gathering | ok | regressed | error, "runs", "wanted", "figures":
    {key: {"status", "reason", "statistic"}}}`` for the metrics and the state file.
    """
    tier = str(document.get("tier"))
    path = baseline_file(out, tier)
    try:
        baseline.add_run(path, document)
        found = baseline.load_baseline(path)
    except baseline.BaselineError as exc:
        return {"state": "error", "reason": str(exc), "runs": 0, "wanted": 0, "figures": {}}
    wanted = baseline.RUNS_WANTED.get(tier, 5)
    if found is None or not baseline.complete(found):
        runs = len(found.get("runs") or ()) if found else 0
        return {"state": "gathering", "runs": runs, "wanted": wanted, "figures": {}}
    verdicts = baseline.compare_history(found, _history(results_dir, tier))
    figures = {
        key: {"status": v.status, "reason": v.reason, "statistic": v.statistic}
        for key, v in verdicts.items()
    }
    regressed = any(v.status == baseline.REGRESSED for v in verdicts.values())
    return {
        "state": "regressed" if regressed else "ok",
        "runs": len(found.get("runs") or ()),
        "wanted": int(found.get("wanted", wanted)),
        "figures": figures,
    }
