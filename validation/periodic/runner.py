"""The on-host periodic checks: the quick tier's workloads and GPU health, run by a systemd timer.

Example (what gpufleet-periodic.service runs, from the validation payload's folder)::

    gpufleet-python -m validation.periodic --tier quick --out /var/lib/gpufleet \\
        --textfile-dir /var/lib/prometheus/node-exporter \\
        --expectations /etc/gpufleet/expectations.json

Writes ``OUT/results/<run_id>.json`` (a results document, gpufleet.report.schema), a copy as
``OUT/latest.json``, the workloads' logs under ``OUT/logs/``, and, with ``--textfile-dir``,
``gpufleet.prom`` for node_exporter's textfile collector, with the host's state against its
tier's baseline (validation.periodic.baseline). Exit status: 0 every check passed, 1 a check
failed, 2 the run could not complete, 4 nothing failed but the run is "unproven" (a speed check
was inconclusive; 3, "could not reach", has no meaning on the host itself).

Runs with the environment's Python on the host: standard library, gpufleet's pure-Python parts
(parsers, health, report) and subprocesses only; no pytest, pyinfra or rich.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.report import prometheus
from gpufleet.report.schema import ResultsSchemaError, new_document, validate_results
from validation.periodic.baseline import own_runs, regression_state
from validation.periodic.checks import (
    busy_check,
    gpu_health_checks,
    gpus_busy,
    run_bundle,
    run_workload,
)
from validation.periodic.dcgm import dcgm_run
from validation.verdicts.tiers import BUNDLED, FULL_WORKLOADS, TIERS


class PeriodicError(RuntimeError):
    """The periodic run cannot start as configured; the message says what to fix."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m validation.periodic",
        description="Run the quick validation tier and GPU health checks on this host.",
    )
    parser.add_argument("--tier", choices=tuple(TIERS), default="quick")
    parser.add_argument("--out", type=Path, default=Path("/var/lib/gpufleet"), metavar="DIR")
    parser.add_argument(
        "--results-dir", type=Path, metavar="DIR", help="results documents (default: OUT/results)"
    )
    parser.add_argument(
        "--textfile-dir", type=Path, metavar="DIR", help="write gpufleet.prom for node_exporter"
    )
    parser.add_argument(
        "--expectations",
        type=Path,
        metavar="FILE",
        help="expectations JSON (host name, inventory data: thresholds, gpu_count, gpu_less)",
    )
    parser.add_argument(
        "--workloads", metavar="A,B", help="run only these workloads (default: the tier's)"
    )
    parser.add_argument(
        "--python", default=sys.executable, metavar="PATH", help="the workloads' Python"
    )
    parser.add_argument("--keep", type=int, default=60, metavar="N", help="results kept (60)")
    parser.add_argument("--timeout", type=int, metavar="S", help="per-workload limit in s")
    return parser


def read_expectations(path: Path | None) -> dict[str, Any]:
    """The parts of an expectations file the periodic run uses (host, host_data).

    Read as plain JSON: ``validation.verdicts.expectations`` builds a NodeSpec, which needs pyinfra.
    """
    if path is None:
        return {"host": socket.gethostname(), "host_data": {}}
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise PeriodicError(f"cannot read expectations file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PeriodicError(f"expectations file {path} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("expectations_version") != 1:
        raise PeriodicError(
            f"{path}: not an expectations document of version 1 (the monitoring stage writes "
            "one; `gpufleet validate` too)"
        )
    data = raw.get("host_data") or {}
    if not isinstance(data, dict) or not isinstance(data.get("thresholds", {}), dict):
        raise PeriodicError(f"{path}: host_data and host_data.thresholds must be JSON objects")
    return {"host": str(raw.get("host") or socket.gethostname()), "host_data": data}


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n")
    tmp.replace(path)


def prune(results_dir: Path, keep: int) -> None:
    """Keep the newest ``keep`` of this runner's own results documents (run ids sort by time);
    any other file in the folder is left alone."""
    runs = own_runs(results_dir)
    for old in runs[: max(0, len(runs) - keep)]:
        old.unlink(missing_ok=True)


def last_success(state_path: Path, textfile: Path | None) -> float | None:
    """The newest last-success time known from the state file and the previous textfile."""
    known = []
    try:
        value = json.loads(state_path.read_text()).get("last_success_timestamp")
        if isinstance(value, (int, float)) and value > 0:
            known.append(float(value))
    except (OSError, json.JSONDecodeError, AttributeError):
        pass
    if textfile is not None:
        previous = prometheus.previous_last_success(textfile)
        if previous is not None:
            known.append(previous)
    return max(known) if known else None


def run(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """One periodic run: checks, workloads, document; returns it and where it was written."""
    expectations = read_expectations(args.expectations)
    data = expectations["host_data"]
    names = TIERS[args.tier]
    if args.workloads:
        names = tuple(n.strip() for n in args.workloads.split(",") if n.strip())
        unknown = [n for n in names if n not in FULL_WORKLOADS]
        if unknown:
            raise PeriodicError(
                f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(FULL_WORKLOADS)}"
            )
    now = datetime.now(timezone.utc)
    run_id = f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    log_dir = args.out / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    checks, gpu_section = gpu_health_checks(data)
    dcgm, dcgm_part = dcgm_run(data)
    checks.append(dcgm)
    workloads = []
    thresholds = dict(data.get("thresholds") or {})
    bundled = [n for n in names if n in BUNDLED.get(args.tier, ())]
    if bundled:  # the tier's workloads in one process, as the suite runs them
        busy = gpus_busy(data)
        if busy is not None:
            checks.extend(busy_check(name, busy) for name in bundled)
        else:
            for check, doc in run_bundle(
                bundled, args=args, thresholds=thresholds, log_dir=log_dir
            ):
                checks.append(check)
                workloads.extend([doc] if doc is not None else [])
    for name in (n for n in names if n not in bundled):
        # Asked before each workload: a job may start while the run is under way.
        busy = gpus_busy(data)
        if busy is not None:
            checks.append(busy_check(name, busy))
            continue
        check, doc = run_workload(name, args=args, thresholds=thresholds, log_dir=log_dir)
        checks.append(check)
        if doc is not None:
            workloads.append(doc)
    spec = {key: data[key] for key in ("tf_version", "gpu_count", "gpu_less") if key in data}
    document = new_document(
        host=expectations["host"],
        run_id=run_id,
        started_at=now.isoformat(timespec="seconds"),
        tier=args.tier,
        target="local://",
        spec={**spec, "runner": "validation.periodic", "python": args.python},
        checks=checks,
        workloads=workloads,
        gpu_health=gpu_section,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - t0, 2),
        vendor={"dcgm": dcgm_part, "nccl_tests": None},  # nccl-tests stresses every GPU: suite only
    )
    validate_results(document)
    return document, store(document, args)


def store(document: dict[str, Any], args: argparse.Namespace) -> Path:
    """Write ``RESULTS/<run_id>.json`` and ``OUT/latest.json``; drop the oldest documents."""
    results_dir = args.results_dir or args.out / "results"
    path = results_dir / f"{document['run_id']}.json"
    _write_json(path, document)
    _write_json(args.out / "latest.json", document)
    prune(results_dir, args.keep)
    return path


def error_document(args: argparse.Namespace, why: str) -> dict[str, Any]:
    """The document of a run that could not start: no checks, and ``run_error`` saying why."""
    now = datetime.now(timezone.utc)
    return new_document(
        host=socket.gethostname(),
        run_id=f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
        started_at=now.isoformat(timespec="seconds"),
        tier=args.tier,
        target="local://",
        spec={"runner": "validation.periodic"},
        checks=[],
        workloads=[],
        gpu_health=None,
        finished_at=now.isoformat(timespec="seconds"),
        duration_s=0.0,
        run_error=why,
    )


def publish(document: dict[str, Any], args: argparse.Namespace) -> Path | None:
    """Write the textfile (carrying the last success over) and the state file."""
    state_path = args.out / "state.json"
    textfile = args.textfile_dir / prometheus.TEXTFILE_NAME if args.textfile_dir else None
    previous = last_success(state_path, textfile)
    finished = prometheus.timestamp(document["finished_at"])
    success = finished if document["status"] == "pass" else previous
    results_dir = args.results_dir or args.out / "results"
    regression = regression_state(document, args.out, results_dir)
    if textfile is not None:
        text = prometheus.render(document, last_success=previous, regression=regression)
        prometheus.write_textfile(textfile, text)
    _write_json(
        state_path,
        {
            "last_run_id": document["run_id"],
            "last_run_timestamp": finished,
            "last_status": document["status"],
            "last_success_timestamp": success,
            "regression": regression,
        },
    )
    return textfile


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.keep < 1:
        print("validation.periodic: --keep must be at least 1", file=sys.stderr)
        return 2
    try:
        document, path = run(args)
    except (PeriodicError, ResultsSchemaError) as exc:
        # Still publish: the metrics must show that the checks stopped running, and why.
        print(f"validation.periodic: {exc}", file=sys.stderr)
        document = error_document(args, str(exc))
        path = store(document, args)
    textfile = publish(document, args)
    summary = ", ".join(f"{n} {s}" for s, n in document["summary"].items() if n)
    print(
        f"{document['status']}: {summary}; results {path}"
        + (f", metrics {textfile}" if textfile else "")
    )
    return {"pass": 0, "fail": 1, "unproven": 4}.get(document["status"], 2)


if __name__ == "__main__":
    raise SystemExit(main())
