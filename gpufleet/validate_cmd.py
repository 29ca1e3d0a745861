"""`gpufleet validate INVENTORY`: run the validation suite on every host, write and show results.

Example::

    gpufleet validate inventories/sandbox.py --tier quick --results-dir results/
    gpufleet validate @local --tier quick

Exit status: 0 every host passed, 1 a check failed somewhere, 2 validation could not run on
some host (bad inventory, unreachable host, the suite broke) or the inventory is unusable.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet import baseline
from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.report.schema import ResultsSchemaError, new_document, validate_results
from gpufleet.validate_ssh import close_masters, hostspec_for, ssh_config_text

SUITE_DIR = Path(__file__).resolve().parent.parent / "validation"
# Whole-host limits for one pytest run (the workloads have their own, shorter, limits).
HOST_TIMEOUT_S = {"quick": 30 * 60, "full": 3 * 60 * 60}


@dataclass
class HostRun:
    """One host's pytest run: where its files go, and what came back."""

    host: InventoryHost
    alias: str
    expectations_path: Path
    results_path: Path
    junit_path: Path
    log_path: Path
    document: dict[str, Any] | None = None
    returncode: int | None = None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet validate",
        description="Validate every host of a pyinfra inventory (pytest + testinfra over SSH).",
    )
    parser.add_argument("inventory", help="pyinfra inventory: a file, host names, or @local")
    parser.add_argument(
        "--tier",
        choices=("quick", "full"),
        default="quick",
        help="quick: host checks and 4 workloads with --quick; full: all 8 workloads at size",
    )
    parser.add_argument(
        "--limit", action="append", default=[], metavar="HOST", help="host or group (glob)"
    )
    parser.add_argument(
        "--results-dir",
        default="results",
        type=Path,
        metavar="DIR",
        help="results JSON per host per run: DIR/<host>/<run_id>.json (default: ./results)",
    )
    parser.add_argument(
        "--junit-xml", type=Path, metavar="PATH", help="default: DIR/junit/RUN_ID.xml"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="environment Python on the hosts (default: the inventory's env; for @local, "
        "the Python running gpufleet)",
    )
    parser.add_argument(
        "--payload-dir",
        metavar="DIR",
        help="directory on the hosts holding the validation and gpufleet packages (default: "
        "the inventory's payload_dir/current; for @local, this checkout)",
    )
    parser.add_argument("--parallel", type=int, default=4, metavar="N", help="hosts at once")
    parser.add_argument(
        "--select",
        metavar="EXPR",
        help="run only the checks matching a pytest -k expression, e.g. 'host_state'",
    )
    return parser


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def safe_name(name: str) -> str:
    """A host name usable as a file name: ``@ssh/gpu-b`` -> ``@ssh_gpu-b``."""
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", name)


def expectations_for(
    host: InventoryHost, *, tier: str, run_id: str, python: str | None, payload_dir: str | None
) -> dict[str, Any]:
    """The expectations document for one host; raises SpecError for bad inventory data."""
    from gpufleet.spec import NodeSpec
    from gpufleet.stages.validation_payload import payload_paths
    from validation.expectations import Expectations, spec_data

    data = spec_data(host.data)
    spec = NodeSpec.from_host_data(data)  # refuse bad data here, with the key named, before SSH
    if host.is_local:
        python = python or sys.executable
        payload_dir = payload_dir or str(SUITE_DIR.parent)
    else:
        # What the validation_payload stage installs: current/{validation,gpufleet}.
        payload_dir = payload_dir or payload_paths(spec.payload_dir)[1]
    return Expectations(
        host=host.name,
        tier=tier,
        run_id=run_id,
        host_data=data,
        python=python,
        payload_dir=payload_dir,
        target=describe_target(host),
    ).to_dict()


def describe_target(host: InventoryHost) -> str:
    """How the host is reached, for people: ``ssh://ops@10.0.0.5:2222`` or ``local://``."""
    if host.is_local:
        return "local://"
    user = f"{host.ssh_user}@" if host.ssh_user else ""
    port = f":{host.ssh_port}" if host.ssh_port else ""
    return f"ssh://{user}{host.ssh_hostname}{port}"


def pytest_command(
    run: HostRun, *, tier: str, run_id: str, ssh_config: Path | None, select: str | None = None
) -> list[str]:
    """The pytest command line for one host (run in a subprocess: its own process, its own
    plugins, and no gevent from pyinfra_cli anywhere near it)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE_DIR),
        f"--hosts={hostspec_for(run.host, run.alias)}",
        f"--expectations={run.expectations_path}",
        f"--results-json={run.results_path}",
        f"--junit-xml={run.junit_path}",
        f"--tier={tier}",
        f"--run-id={run_id}",
        "-o",
        f"junit_suite_name={run.host.name}",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
    ]
    if ssh_config is not None and not run.host.is_local:
        command.append(f"--ssh-config={ssh_config}")
    if select:
        command += ["-k", select]
    return command


def _error_document(run: HostRun, *, tier: str, run_id: str, started_at: str, why: str) -> dict:
    return new_document(
        host=run.host.name,
        run_id=run_id,
        started_at=started_at,
        tier=tier,
        target=describe_target(run.host),
        spec={},
        checks=[],
        workloads=[],
        gpu_health=None,
        run_error=why,
    )


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def run_host(
    run: HostRun, *, tier: str, run_id: str, ssh_config: Path | None, select: str | None = None
) -> None:
    """Run pytest for one host and load (or, if it could not run, make up) its document."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    command = pytest_command(run, tier=tier, run_id=run_id, ssh_config=ssh_config, select=select)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with run.log_path.open("w") as log:
        try:
            proc = subprocess.run(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=run.log_path.parent,
                env=env,
                timeout=HOST_TIMEOUT_S[tier],
                check=False,
            )
            run.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            run.document = _error_document(
                run,
                tier=tier,
                run_id=run_id,
                started_at=started_at,
                why=f"validation did not finish within {HOST_TIMEOUT_S[tier]} s",
            )
            return
    try:
        document = json.loads(run.results_path.read_text())
        validate_results(document)
    except (OSError, json.JSONDecodeError, ResultsSchemaError) as exc:
        run.document = _error_document(
            run,
            tier=tier,
            run_id=run_id,
            started_at=started_at,
            why=f"the suite wrote no usable results (pytest exit {run.returncode}: {exc}); "
            f"log:\n{_log_tail(run.log_path)}",
        )
        return
    if run.returncode not in (0, 1) and not document["run_error"]:
        document = {**document, "run_error": f"pytest exit status {run.returncode}"}
        document["status"] = "error"
    run.document = document


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
            run.document = _error_document(
                run, tier="quick", run_id=run_id, started_at="", why="validation never started"
            )
        path = results_dir / safe_name(run.host.name) / f"{run_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run.document, indent=2, default=str) + "\n")
        paths.append(path)
    return paths


def baseline_notes(results_dir: Path, documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record each host's baseline (its first passing full run, gpufleet.baseline) and compare
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from gpufleet.report.terminal import print_report
    from gpufleet.spec import SpecError

    try:
        hosts = load_hosts(args.inventory, args.limit)
    except InventoryError as exc:
        print(f"gpufleet validate: {exc}", file=sys.stderr)
        return 2
    run_id = new_run_id()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    workdir = Path(tempfile.mkdtemp(prefix="gpufleet-validate-"))
    runs: list[HostRun] = []
    for index, host in enumerate(hosts):
        stem = f"{index:03d}-{safe_name(host.name)}"
        runs.append(
            HostRun(
                host=host,
                alias=f"gpufleet-{index:03d}",
                expectations_path=workdir / f"{stem}.expectations.json",
                results_path=workdir / f"{stem}.results.json",
                junit_path=workdir / f"{stem}.junit.xml",
                log_path=workdir / f"{stem}.log",
            )
        )
    ssh_hosts = [(run.alias, run.host) for run in runs if not run.host.is_local]
    ssh_config = workdir / "ssh_config" if ssh_hosts else None
    if ssh_config is not None:
        ssh_config.write_text(ssh_config_text(ssh_hosts, control_dir=workdir))
    pending = []
    for run in runs:
        try:
            doc = expectations_for(
                run.host,
                tier=args.tier,
                run_id=run_id,
                python=args.python,
                payload_dir=args.payload_dir,
            )
        except SpecError as exc:
            run.document = _error_document(
                run, tier=args.tier, run_id=run_id, started_at=started_at, why=str(exc)
            )
            continue
        run.expectations_path.write_text(json.dumps(doc, indent=2))
        pending.append(run)
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            for future in [
                pool.submit(
                    run_host,
                    run,
                    tier=args.tier,
                    run_id=run_id,
                    ssh_config=ssh_config,
                    select=args.select,
                )
                for run in pending
            ]:
                future.result()
    finally:
        if ssh_config is not None:
            close_masters(ssh_config, [alias for alias, _host in ssh_hosts])
    paths = write_results(runs, args.results_dir, run_id)
    junit = args.junit_xml or args.results_dir / "junit" / f"{run_id}.xml"
    merge_junit(runs, junit)
    documents = [run.document for run in runs if run.document is not None]
    notes = baseline_notes(args.results_dir, documents)
    print_report(
        [
            {**doc, "_path": str(path), "_baseline": note}
            for doc, path, note in zip(documents, paths, notes, strict=True)
        ]
    )
    print(f"results: {args.results_dir}/*/{run_id}.json  junit: {junit}")
    shutil.rmtree(workdir, ignore_errors=True)
    return exit_status(documents)
