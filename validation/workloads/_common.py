"""What every workload shares: command line, stderr logging, device discovery and the JSON document.

Example (a workload's module):
    >>> def body(run: Run) -> None:
    ...     run.config["steps"] = 10
    ...     run.add_check("loss_finite", "correctness", Verdict("pass", "all finite"))
    >>> if __name__ == "__main__":
    ...     raise SystemExit(main("example", body, description="What it proves."))

Imports only the standard library, numpy, TensorFlow (lazily) and the validation package:
these files are copied to the hosts and run with the provisioned environment's Python.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpufleet.floors.names import apply_overrides
from validation.host.nvml_sampler import NvmlSampler
from validation.json_argument import json_object
from validation.verdicts.harness import FAIL, NOT_APPLICABLE, Verdict, combine
from validation.workloads import xla_cache
from validation.workloads._devices import check_tensorflow_sees_the_gpus, discover_devices
from validation.workloads._floors import load_floors, read_calibration
from validation.workloads._run import NO_GPU, Run, WorkloadError

__all__ = ["NO_GPU", "Run", "WorkloadError", "execute", "main", "not_applicable", "prepare"]

SCHEMA_VERSION = 1


def _parser(workload: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m validation.workloads.{workload}", description=description
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and few repetitions (CI, and the quick validation tier)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        default="-",
        metavar="PATH",
        help="also write the JSON document to PATH (it is always printed)",
    )
    parser.add_argument(
        "--thresholds",
        default=None,
        metavar="JSON",
        help="threshold overrides as a JSON object, or @FILE holding one "
        "(the inventory's 'thresholds'); keys from thresholds.toml",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="JSON",
        help="a calibration file (gpufleet.floors.calibration) as JSON, or @FILE holding one: "
        "its floors replace the published-derived ones for this kind of host",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for data and bootstrap")
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help="compile only: build and call each XLA-compiled step of this tier once, so that "
        "XLA's persistent cache holds it; nothing is timed and no document is written "
        "(validation.workloads.warm runs every tier's)",
    )
    return parser


def _read_overrides(text: str | None) -> dict[str, Any]:
    return json_object(text, "--thresholds", WorkloadError) or {}


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ %(name)s device=%(device)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.addFilter(_default_device)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def _default_device(record: logging.LogRecord) -> bool:
    """TensorFlow's own Python log records carry no device; give them "-"."""
    if not hasattr(record, "device"):
        record.device = "-"
    return True


def _import_tensorflow() -> Any:
    # TensorFlow's C++ INFO lines (oneDNN, CPU features) would drown the step log.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf

    # TensorFlow's Python INFO lines (one per collective) would too.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    return tf


def _document(run: Run, started: float, started_at: str, verdict: Verdict) -> dict[str, Any]:
    summary = run.sampler.summary() if run.sampler else None
    marks = xla_cache.trace_marks()
    if any(marks.values()):  # compiled steps traced at (or past) their uid mark, process-wide
        run.config["xla_trace_marks"] = marks
    reason = None
    if summary is None:
        why = run.sampler.unavailable_reason if run.sampler else "sampler not started"
        reason = f"{NO_GPU} ({why})" if not run.has_gpu else f"no NVML readings: {why}"
    return {
        "workload": run.workload,
        "schema_version": SCHEMA_VERSION,
        "host": socket.gethostname(),
        "started_at": started_at,
        "duration_s": round(time.monotonic() - started, 3),
        "devices": run.devices,
        "config": run.config,
        "measurements": run.measurements,
        "metrics": run.metrics,
        "gpu_utilization": summary,
        "gpu_utilization_reason": reason,
        "checks": run.checks,
        "verdict": verdict.to_dict(),
    }


def start_tensorflow(run: Run) -> None:
    """Import TensorFlow (the XLA cache bounded first) and open NVML, before any GPU context:
    the GPU-busy guard must see only other jobs' processes."""
    run.config["xla_cache"] = xla_cache.prepare()
    run.step("import", "importing TensorFlow")
    run.tf = _import_tensorflow()
    run.config["tensorflow_version"] = run.tf.__version__
    run.sampler = NvmlSampler()
    run.busy = run.sampler.busy_reason()
    run.config["gpu_busy"] = run.busy


def prepare(run: Run, logical_cpus: int, calibration: dict[str, Any] | None) -> None:
    """Devices (once TensorFlow is imported), thresholds and floors of one run."""
    discover_devices(run, logical_cpus)
    load_run_limits(run, calibration)


def load_run_limits(run: Run, calibration: dict[str, Any] | None) -> None:
    """Thresholds (thresholds.toml and the overrides) and floors for run's devices; logged."""
    from validation.verdicts.thresholds import load_thresholds

    overrides = _read_overrides(run.args.thresholds)
    run.thresholds = load_thresholds(run.compute_capability, run.gpu_model, overrides)
    load_floors(run, calibration)
    # The inventory's thresholds that set a floor (xla_speedup_min): they beat published
    # floors and calibration, as allreduce_busbw_min_gbps does (gpufleet.floors.names).
    run.floors = {f.name: f for f in apply_overrides(run.floors.values(), overrides)}
    run.step("devices", ", ".join(f"{d['name']} ({d['model'] or d['type']})" for d in run.devices))
    check_tensorflow_sees_the_gpus(run)


def execute(
    run: Run, body: Callable[[Run], None], setup: Callable[[], None]
) -> tuple[Verdict, int]:
    """``setup`` then ``body`` with NVML sampling; the verdict, and 1 when it crashed."""
    try:
        setup()
        assert run.sampler is not None
        with run.sampler.running():
            body(run)
        return combine([(c["name"], Verdict(c["status"], c["reason"])) for c in run.checks]), 0
    except Exception as exc:  # the document must still come out, saying what broke
        run.log.error("step=error %s", traceback.format_exc().rstrip(), extra={"device": "-"})
        return Verdict(FAIL, f"{type(exc).__name__}: {exc}"), 1


def warm_status(run: Run, crashed: int) -> int:
    """A warm-up's exit status, logged: 1 when it crashed or a setup check failed (TensorFlow
    sees none of the GPUs NVML sees: it would have compiled for the CPU), else 0."""
    failed = [c["name"] for c in run.checks if c["status"] == FAIL]
    if crashed:
        outcome = "crashed"
    elif failed:
        outcome = f"failed {', '.join(failed)}"
    else:
        outcome = "each step built and called once"
    run.step("done", f"warm-up: {outcome}")
    return 1 if crashed or failed else 0


def document_text(run: Run, started: float, started_at: str, verdict: Verdict) -> str:
    """The run's JSON document as text (numpy values plain, infinities and NaN as null)."""
    document = _document(run, started, started_at, verdict)
    return json.dumps(_plain(document), indent=2, allow_nan=False)


def new_run(workload: str, args: argparse.Namespace) -> tuple[Run, float, str]:
    """A Run for ``workload`` and when it started (monotonic, and ISO 8601 UTC)."""
    started, started_at = time.monotonic(), dt.datetime.now(dt.timezone.utc).isoformat()
    run = Run(workload=workload, args=args)
    run.config.update({"quick": run.quick, "seed": args.seed})
    return run, started, started_at


def main(
    workload: str,
    body: Callable[[Run], None],
    *,
    description: str,
    logical_cpus: int = 1,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """Parse arguments, set up devices and thresholds, run ``body``, print the JSON document.

    Exit status: 0 when a document with a verdict was printed (whatever the verdict), 1 when the
    workload crashed (a document with verdict "fail" and the error is still printed), 2 for
    bad arguments (argparse's convention).
    """
    parser = _parser(workload, description)
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args(argv)
    _setup_logging()
    run, started, started_at = new_run(workload, args)

    def setup() -> None:
        calibration = read_calibration(args.calibration)
        _read_overrides(args.thresholds)  # refused before TensorFlow's import costs seconds
        start_tensorflow(run)
        prepare(run, logical_cpus, calibration)

    verdict, status = execute(run, body, setup)
    if run.warm:  # a warm-up has no results: its log and exit status say how it went
        status = warm_status(run, status)
        if run.sampler:
            run.sampler.close()
        return status
    text = document_text(run, started, started_at, verdict)
    print(text)
    if args.json not in (None, "-"):
        Path(args.json).write_text(text + "\n")
    run.step("done", f"verdict {verdict.status}: {verdict.reason}")
    if run.sampler:
        run.sampler.close()
    return status


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars/arrays as lists and numbers, infinities and NaN as null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def not_applicable(reason: str) -> Verdict:
    return Verdict(NOT_APPLICABLE, reason)
