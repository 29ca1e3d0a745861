"""The on-host periodic checks: the quick tier's workloads and GPU health, run by a systemd timer.

Example (what gpufleet-periodic.service runs, from the validation payload's folder)::

    gpufleet-python -m validation.periodic --tier quick --out /var/lib/gpufleet \\
        --textfile-dir /var/lib/prometheus/node-exporter \\
        --expectations /etc/gpufleet/expectations.json

Writes ``OUT/results/<run_id>.json`` (a results document, gpufleet.report.schema), a copy as
``OUT/latest.json``, the workloads' logs under ``OUT/logs/``, and, with ``--textfile-dir``,
``gpufleet.prom`` for node_exporter's textfile collector. Exit status: 0 every check passed,
1 a check failed, 2 the run could not complete.

Runs with the environment's Python on the host: standard library, gpufleet's pure-Python parts
(parsers, health, report) and subprocesses only; no pytest, pyinfra or rich.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet import health
from gpufleet.report import prometheus
from gpufleet.report.schema import ResultsSchemaError, new_document, validate_results
from validation.tiers import FULL_WORKLOADS, TIERS, TIMEOUT_S

PAYLOAD_ROOT = Path(__file__).resolve().parent.parent
NVIDIA_SMI_TIMEOUT_S = 60
# The suite checks these under load (a matmul on every GPU); a periodic run samples idle.
UNDER_LOAD_CHECKS = ("clocks_not_throttled_under_load", "pcie_link_at_max_under_load")
PCI_DEVICES = Path("/sys/bus/pci/devices")


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

    Read as plain JSON: ``validation.expectations`` builds a NodeSpec, which needs pyinfra.
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


def _check(name: str, status: str, message: str = "", **figures: Any) -> dict[str, Any]:
    return {
        "name": name,
        "status": status,
        "message": message,
        "figures": figures,
        "duration_s": 0.0,
    }


# ------------------------------------------------------------------------------- GPU health


def nvidia_gpus_on_bus() -> int:
    """NVIDIA display controllers (vendor 0x10de, class 0x03xxxx) in sysfs."""
    count = 0
    for device in PCI_DEVICES.glob("*"):
        try:
            vendor = (device / "vendor").read_text().strip()
            pci_class = (device / "class").read_text().strip()
        except OSError:
            continue
        count += vendor == "0x10de" and pci_class.startswith("0x03")
    return count


def gpu_health_checks(
    data: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The suite's idle GPU health checks from ``nvidia-smi -q -x``, and the gpu_health section."""
    names = ("gpu_count", "no_uncorrectable_ecc", "no_row_remap_pending_or_failed")
    expected = data.get("gpu_count")
    smi_path = shutil.which("nvidia-smi")
    under_load = [
        _check(
            f"gpu_health::{name}",
            "skipped",
            "checked under load by `gpufleet validate`; the periodic run samples idle GPUs",
        )
        for name in UNDER_LOAD_CHECKS
    ]
    if data.get("gpu_less") and not nvidia_gpus_on_bus():
        # As the suite does: no GPU to check. Only on a host declared GPU-less, so that a GPU
        # fallen off the bus of a GPU server still fails. The driver's tools may be installed
        # (nvidia-smi then fails "couldn't communicate with the NVIDIA driver").
        why = "no GPU: the host is GPU-less (gpu_less) and has no NVIDIA GPU on the PCI bus"
        return [_check(f"gpu_health::{n}", "skipped", why) for n in names] + under_load, None
    if smi_path is None:
        if data.get("gpu_less") or not expected:
            why = "no GPU: nvidia-smi is not on PATH (no NVIDIA driver); GPU health not checked"
            return [_check(f"gpu_health::{n}", "skipped", why) for n in names] + under_load, None
        why = f"nvidia-smi is not on PATH, but {expected} GPU(s) are expected: is the driver in?"
        return [_check(f"gpu_health::{n}", "fail", why) for n in names] + under_load, None
    try:
        proc = subprocess.run(
            [smi_path, "-q", "-x"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"nvidia-smi -q -x exited {proc.returncode}: "
                f"{(proc.stdout + proc.stderr).strip()[:300]}"
            )
        from gpufleet.parsers import parse_nvidia_smi_xml

        smi = parse_nvidia_smi_xml(proc.stdout)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired, OSError) as exc:
        why = f"GPU health unknown: {exc}"
        return [_check(f"gpu_health::{n}", "fail", why) for n in names] + under_load, None
    findings = health.evaluate_idle(smi, expected)
    section = {
        "gpus": health.gpu_summary(smi),
        "findings": [f.to_dict() for f in findings],
        "driver_version": health.field_of(smi, "driver_version"),
        "cuda_version": health.field_of(smi, "cuda_version"),
    }
    checks = []
    for name, finding_check in zip(names, ("gpu_count", "ecc", "row_remap"), strict=True):
        bad = health.failures(findings, finding_check)
        seen = [f.message for f in findings if f.check == finding_check]
        checks.append(
            _check(
                f"gpu_health::{name}",
                "fail" if bad else "pass",
                "; ".join(f.message for f in bad),
                findings=seen,
                **({"nvidia_smi": len(section["gpus"])} if name == "gpu_count" else {}),
            )
        )
    return checks + under_load, section


# -------------------------------------------------------------------------------- workloads


def workload_command(
    name: str, *, python: str, json_path: Path, quick: bool, thresholds: dict[str, Any]
) -> list[str]:
    """The argv of one workload run, e.g. ``[python, "-m", "validation.workloads.xla", ...]``."""
    command = [python, "-m", f"validation.workloads.{name}", "--json", str(json_path)]
    if quick:
        command.append("--quick")
    if thresholds:
        command += ["--thresholds", json.dumps(thresholds)]
    return command


def judge_workload(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The check for one workload document, as the suite's test_workload decides it."""
    verdict = doc.get("verdict") or {}
    status, reason = str(verdict.get("status")), str(verdict.get("reason", ""))
    figures = dict(doc.get("metrics") or {})
    failed = [
        f"{c.get('name')}: {c.get('reason')}"
        for c in doc.get("checks") or ()
        if c.get("status") == "fail"
    ]
    if failed:
        return _check(f"workloads::{name}", "fail", f"{name}: " + "; ".join(failed), **figures)
    mapped = {
        "pass": ("pass", reason),
        "fail": ("fail", f"{name}: {reason}"),
        "inconclusive": ("inconclusive", f"inconclusive: {reason}"),
        "not_applicable": ("skipped", f"not applicable: {reason}"),
    }
    state, message = mapped.get(status, ("error", f"{name}: unknown verdict {status!r}"))
    return _check(f"workloads::{name}", state, message, **figures)


def run_workload(
    name: str, *, args: argparse.Namespace, thresholds: dict[str, Any], log_dir: Path
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run one workload in a subprocess; its check and (when it printed one) its document."""
    timeout = args.timeout or TIMEOUT_S[args.tier]
    env = {**os.environ, "PYTHONPATH": str(PAYLOAD_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    log_path = log_dir / f"{name}.log"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpufleet-periodic-") as tmp:
        json_path = Path(tmp) / f"{name}.json"
        command = workload_command(
            name,
            python=args.python,
            json_path=json_path,
            quick=args.tier == "quick",
            thresholds=thresholds,
        )
        with log_path.open("w") as log:
            try:
                proc = subprocess.run(
                    command,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    cwd=PAYLOAD_ROOT,
                    env=env,
                    timeout=timeout,
                    check=False,
                )
                rc: int | str = proc.returncode
            except subprocess.TimeoutExpired:
                rc = f"killed after {timeout} s"
            except OSError as exc:
                rc = f"could not start {args.python}: {exc}"
        try:
            doc = json.loads(json_path.read_text())
        except (OSError, json.JSONDecodeError):
            doc = None
    duration = round(time.monotonic() - started, 3)
    if not isinstance(doc, dict) or "verdict" not in doc:
        tail = "\n".join(log_path.read_text(errors="replace").strip().splitlines()[-6:])
        check = _check(
            f"workloads::{name}",
            "error",
            f"{name} wrote no JSON document (exit {rc}); log {log_path}:\n{tail}",
        )
        check["duration_s"] = duration
        return check, None
    check = judge_workload(name, doc)
    check["duration_s"] = duration
    return check, doc


# ----------------------------------------------------------------------------- the results


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n")
    tmp.replace(path)


def prune(results_dir: Path, keep: int) -> None:
    """Keep the newest ``keep`` results documents (run ids sort by time)."""
    runs = sorted(p for p in results_dir.glob("*.json") if not p.name.startswith("."))
    for old in runs[: max(0, len(runs) - keep)]:
        old.unlink(missing_ok=True)


def last_success(state_path: Path, textfile: Path | None) -> float | None:
    """The newest last-success time known from the state file and the previous textfile."""
    known = []
    try:
        value = json.loads(state_path.read_text()).get("last_success_timestamp")
        if isinstance(value, int | float) and value > 0:
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
    workloads = []
    for name in names:
        check, doc = run_workload(
            name, args=args, thresholds=dict(data.get("thresholds") or {}), log_dir=log_dir
        )
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
    if textfile is not None:
        prometheus.write_textfile(textfile, prometheus.render(document, last_success=previous))
    _write_json(
        state_path,
        {
            "last_run_id": document["run_id"],
            "last_run_timestamp": finished,
            "last_status": document["status"],
            "last_success_timestamp": success,
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
    return {"pass": 0, "fail": 1}.get(document["status"], 2)


if __name__ == "__main__":
    raise SystemExit(main())
