"""What a `gpufleet validate` run leaves: results files, merged JUnit, baselines, exit status."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.report.vendor_section import summary_properties
from gpufleet.text import plain, redact_data
from gpufleet.validate import baseline
from gpufleet.validate.baseline import safe_name
from gpufleet.validate.hostrun import HostRun, error_document
from gpufleet.validate.ssh import hostspec_for


def writable_dir_problem(path: Path, option: str) -> str:
    """Why ``path`` cannot be the results directory (made when missing), or "" when it can."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{option} {path} exists and is not a directory; pass a directory"
    except OSError as exc:
        why = exc.strerror or exc
        return f"{option} {path} cannot be created ({why}); pass a writable directory"
    if not path.is_dir():
        return f"{option} {path} is not a directory; pass a directory"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{option} {path} is not writable by this user; pass a writable directory"
    return ""


def writable_file_problem(path: Path, option: str) -> str:
    """Why a file cannot be written at ``path`` (its folder made when missing), or ""."""
    if path.is_dir():
        return f"{option} {path} is a directory; pass a file path, e.g. {path / 'junit.xml'}"
    problem = writable_dir_problem(path.parent, f"the folder of {option}")
    if problem:
        return problem
    if path.exists() and not os.access(path, os.W_OK):
        return f"{option} {path} is not writable by this user; pass a writable path"
    if not path.exists():  # a folder that takes no new file (/proc, a read-only mount)
        try:
            path.open("x").close()
            path.unlink()
        except OSError as exc:
            return f"{option} {path} cannot be created ({exc.strerror or exc}); pass another path"
    return ""


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
        document = run.document or {}
        run_error = document.get("run_error")
        if document.get("status"):
            properties = suites[0].find("properties")
            if properties is None:
                properties = ET.Element("properties")
                suites[0].insert(0, properties)
            ET.SubElement(properties, "property", name="gpufleet_status", value=document["status"])
            # DCGM's verdict and the nccl-tests figures (the results' vendor section).
            for name, value in summary_properties(document):
                ET.SubElement(properties, "property", name=name, value=value)
        if document.get("status") == "unproven":
            # Not a pass: CI reading the JUnit sees it as a failure, as the exit status (3) says.
            suite = suites[0]
            why = "; ".join(
                f"{c.get('name')}: {c.get('message', '')}"
                for c in document.get("checks") or ()
                if c.get("status") == "inconclusive"
            )
            case = ET.SubElement(suite, "testcase", classname="gpufleet", name="unproven")
            ET.SubElement(case, "failure", type="unproven", message=f"unproven: {why}"[:500])
            suite.set("tests", str(int(suite.get("tests", "0")) + 1))
            suite.set("failures", str(int(suite.get("failures", "0")) + 1))
        if run_error:
            suite = suites[0]
            case = ET.SubElement(suite, "testcase", classname="gpufleet", name="run")
            ET.SubElement(case, "error", message=run_error[:500])
            suite.set("tests", str(int(suite.get("tests", "0")) + 1))
            suite.set("errors", str(int(suite.get("errors", "0")) + 1))
        root.extend(suites)
    # Messages and output quote hosts: no URL credential, and no control character, which
    # XML 1.0 cannot hold at all (one ESC from a host's log would make the file unreadable).
    for element in root.iter():
        element.attrib.update({k: plain(v) for k, v in element.attrib.items()})
        element.text = plain(element.text) if element.text else element.text
        element.tail = plain(element.tail) if element.tail else element.tail
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
        # From here on (file, baseline, JUnit, terminal) no URL credential is left in it.
        run.document = redact_data(run.document)
        path.write_text(json.dumps(run.document, indent=2, default=str) + "\n")
        paths.append(path)
    return paths


def _history(results_dir: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The host's earlier results documents of ``doc``'s tier, oldest first (for the CUSUM)."""
    from gpufleet.report.schema import ResultsSchemaError, validate_results

    earlier = []
    for path in (results_dir / safe_name(str(doc.get("host", "")))).glob("*.json"):
        if path.name.startswith(("baseline", ".")):
            continue
        try:
            other = json.loads(path.read_text())
            validate_results(other)
        except (OSError, ValueError, ResultsSchemaError):
            continue
        if other.get("tier") == doc.get("tier") and other.get("run_id") != doc.get("run_id"):
            earlier.append(other)
    earlier.sort(key=lambda d: (str(d.get("started_at") or ""), str(d.get("run_id") or "")))
    return [d for d in earlier if str(d.get("started_at") or "") <= str(doc.get("started_at"))]


def baseline_notes(results_dir: Path, documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add qualifying runs to each host's baseline of their tier (gpufleet.validate.baseline)
    and compare the other runs with it: per document, ``{"state", "lines"}`` for the table.

    ``state`` is "new" (this run joined the baseline), "regressed", "ok" (compared, nothing
    regressed), "none" (no complete baseline yet: nothing to compare) or "error".
    """
    notes = []
    for doc in documents:
        if doc.get("selection") and doc.get("status") == "pass":
            line = f"a partial run (--select {doc['selection']}): not added to the baseline"
            notes.append({"state": "none", "lines": [line]})
            continue
        try:
            path = baseline.record_run(results_dir, doc)
            if path is not None:
                base = baseline.load_baseline(path) or {}
                have, wanted = len(base.get("runs") or ()), base.get("wanted")
                line = f"run {doc['run_id']} joins the {doc['tier']} baseline ({have} of {wanted})"
                notes.append({"state": "new", "lines": [line]})
                continue
            tier = str(doc.get("tier"))
            found = baseline.load_baseline(baseline.baseline_path(results_dir, doc["host"], tier))
        except baseline.BaselineError as exc:
            notes.append({"state": "error", "lines": [str(exc)]})
            continue
        if found is None or not baseline.complete(found) or doc["status"] == "error":
            notes.append({"state": "none", "lines": []})
            continue
        regressions = baseline.compare(found, doc, history=_history(results_dir, doc))
        notes.append(
            {
                "state": "regressed" if regressions else "ok",
                "lines": [r.message for r in regressions],
            }
        )
    return notes


# Exit status per outcome, worst first (docs/reference/exit-codes.md, the same order as
# drift's): a host the suite broke on (2), a host it could not reach (3), a failed check (1), a
# host whose speed checks were inconclusive ("unproven", 4, a soft fail), all passed (0).
EXIT_STATUS = {"error": 2, "unreachable": 3, "fail": 1, "unproven": 4, "pass": 0}
UNREACHED = "could not reach "  # how the suite's run_error names a host SSH could not reach


def outcome(document: dict[str, Any]) -> str:
    """The document's status, with an ``error`` the suite met connecting called ``unreachable``."""
    status = str(document.get("status"))
    if status == "error" and str(document.get("run_error") or "").startswith(UNREACHED):
        return "unreachable"
    return status


def exit_status(documents: Sequence[dict[str, Any]]) -> int:
    """2 if the suite broke on a host, else 3 if one could not be reached, else 1 if one
    failed, else 4 if one is unproven, else 0."""
    outcomes = {outcome(doc) for doc in documents}
    for status, code in EXIT_STATUS.items():
        if status in outcomes:
            return code
    return 0
