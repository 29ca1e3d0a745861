"""What a `gpufleet validate` run leaves: results files, merged JUnit, baselines, exit status."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.validate import baseline
from gpufleet.validate.hostrun import HostRun, error_document
from gpufleet.validate.ssh import hostspec_for


def safe_name(name: str) -> str:
    """A host name usable as a file name: ``@ssh/gpu-b`` -> ``@ssh_gpu-b``."""
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", name)


def merge_junit(runs: Sequence[HostRun], out: Path) -> None:
    """One JUnit XML for the run: every host's <testsuite>, named after the inventory host;
    a host whose run broke gets an <error> test case saying why."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    for run in runs:
        suites: list[ET.Element] = []
        if run.junit_path.exists():
            try:
                tree = ET.parse(run.junit_path).getroot()
                suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
            except ET.ParseError:
                suites = []
        if not suites:
            suites = [ET.Element("testsuite", name=run.host.name, tests="0", errors="0")]
        hostspec = hostspec_for(run.host, run.alias)
        for case in suites[0].iter("testcase"):
            case.set("name", case.get("name", "").replace(hostspec, run.host.name))
        run_error = (run.document or {}).get("run_error")
        if run_error:
            suite = suites[0]
            case = ET.SubElement(suite, "testcase", classname="gpufleet", name="run")
            ET.SubElement(case, "error", message=run_error[:500])
            suite.set("tests", str(int(suite.get("tests", "0")) + 1))
            suite.set("errors", str(int(suite.get("errors", "0")) + 1))
        root.extend(suites)
    out.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def write_results(runs: Sequence[HostRun], results_dir: Path, run_id: str) -> list[Path]:
    """Write each host's document to ``DIR/<host>/<run_id>.json``; returns the paths."""
    paths = []
    for run in runs:
        if run.document is None:  # every run ends with a document; this one never started
            run.document = error_document(
                run, tier="quick", run_id=run_id, started_at="", why="validation never started"
            )
        path = results_dir / safe_name(run.host.name) / f"{run_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run.document, indent=2, default=str) + "\n")
        paths.append(path)
    return paths


def baseline_notes(results_dir: Path, documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record each host's baseline (its first passing full run, ``baseline``) and compare
    the other runs with it: per document, ``{"state", "lines"}`` for the terminal table.

    ``state`` is "new" (this run became the baseline), "regressed", "ok" (compared, nothing
    regressed), "none" (no baseline yet, or another tier: nothing to compare) or "error".
    """
    notes = []
    for doc in documents:
        try:
            if baseline.record_run(results_dir, doc) is not None:
                notes.append({"state": "new", "lines": [f"run {doc['run_id']} is the baseline"]})
                continue
            base = baseline.load_baseline(baseline.baseline_path(results_dir, doc["host"]))
        except baseline.BaselineError as exc:
            notes.append({"state": "error", "lines": [str(exc)]})
            continue
        if base is None or base.get("tier") != doc.get("tier") or doc["status"] == "error":
            notes.append({"state": "none", "lines": []})
            continue
        regressions = baseline.compare(base, doc)
        notes.append(
            {
                "state": "regressed" if regressions else "ok",
                "lines": [r.message for r in regressions],
            }
        )
    return notes


def exit_status(documents: Sequence[dict[str, Any]]) -> int:
    """2 if any host could not be validated, else 1 if any failed, else 0."""
    if any(doc["status"] == "error" for doc in documents):
        return 2
    if any(doc["status"] == "fail" for doc in documents):
        return 1
    return 0
