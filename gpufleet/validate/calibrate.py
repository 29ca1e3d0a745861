"""`gpufleet validate --calibrate`: full-tier runs on a known-good host, a calibration file."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.floors import calibration
from gpufleet.floors.checks import figures_from
from gpufleet.floors.derived import Floor, FloorError, canonical_interconnect, floors_for
from gpufleet.floors.names import dotted
from gpufleet.inventory import InventoryError, load_hosts
from gpufleet.text import plain
from gpufleet.validate import calibfile
from gpufleet.validate.calibfile import FigureRuns
from gpufleet.validate.runner import new_run_id, run_hosts

DEFAULT_RUNS = 3
DEFAULT_MARGIN = 0.90
DEFAULT_DIR = Path("calibration")
# A run whose status is one of these is not a known-good host's: its figures are not calibrated.
BAD_STATUSES = ("fail", "error")


def refusal(doc: dict[str, Any]) -> str | None:
    """Why a run's document shows a host that is not known-good, or None when it may calibrate.

    A run whose only failures are speed checks of its workloads is accepted (review 2, N9): a
    floor set before calibration may sit above a healthy host, and calibration is what replaces
    it. Refused: a run error, a failing or erroring check outside the workloads (health,
    vendor diagnostics), a workload that crashed (no checks) or failed a check of any other
    kind (correctness, evidence, memory, utilization)."""
    if doc.get("run_error"):
        return str(doc["run_error"])
    if doc.get("status") not in BAD_STATUSES:
        return None
    workloads = {str(w.get("workload")): w for w in doc.get("workloads") or ()}
    why = []
    for check in doc.get("checks") or ():
        if check.get("status") not in BAD_STATUSES:
            continue
        name = str(check.get("name"))
        workload = (
            workloads.get(name.removeprefix("workloads::"))
            if name.startswith("workloads::")
            else None
        )
        if workload is None or check.get("status") == "error":
            why.append(name)
            continue
        checks = workload.get("checks") or ()
        bad = [c for c in checks if c.get("status") == "fail" and c.get("kind") != "speed"]
        if not checks:
            why.append(f"{name} (crashed: no checks)")
        elif bad:
            why.append(f"{name} ({', '.join(str(c.get('name')) for c in bad[:3])})")
    speed_only = any(c.get("status") in BAD_STATUSES for c in doc.get("checks") or ())
    return ", ".join(why[:5]) or (None if speed_only else "no failing check named")


class CalibrationError(Exception):
    """Calibration cannot go on; the message says why and what to do."""


def _is_number(value: object) -> bool:
    """A finite number: a NaN or infinite figure (a broken measurement) makes no floor."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value)  # type: ignore[arg-type]


def check_args(args: argparse.Namespace) -> None:
    """Refuse what calibration cannot do before any host runs."""
    if len(args.limit) != 1:
        raise CalibrationError(
            "--calibrate needs exactly one --limit HOST: the one host you declare healthy. "
            "Fix: e.g. gpufleet validate inventory.py --calibrate --limit gpu01"
        )
    if args.runs < 2:
        raise CalibrationError(f"--runs {args.runs}: a spread needs at least 2 runs (default 3)")
    if args.tier not in (None, calibfile.CALIBRATED_TIER):
        raise CalibrationError(
            "--calibrate runs the full tier (the tier calibrations apply to); drop --tier"
        )
    if not 0 < args.margin <= 1:
        raise CalibrationError(f"--margin {args.margin} must be in (0, 1], e.g. 0.9")
    if args.output is not None and args.output.exists() and not args.force:
        raise CalibrationError(f"{args.output} exists; pass --force to overwrite it")


def host_kind(documents: list[dict[str, Any]]) -> tuple[str, int, str]:
    """The kind every run's workloads recorded (config.host_kind); the CPU kind where no
    workload saw a GPU."""
    kinds: set[tuple[str, int, str]] = set()
    saw_gpu = False
    for doc in documents:
        for workload in doc.get("workloads") or ():
            config = workload.get("config") or {}
            kind = config.get("host_kind")
            if isinstance(kind, dict):
                count = int(kind["gpu_count"])
                link = canonical_interconnect(str(kind["interconnect"]), count)
                kinds.add((str(kind["gpu_model"]), count, link))
            saw_gpu |= any(d.get("type") == "GPU" for d in workload.get("devices") or ())
    kinds.discard((calibration.CPU_MODEL, calibration.CPU_COUNT, calibration.CPU_INTERCONNECT))
    if len(kinds) > 1:
        raise CalibrationError(
            f"the workloads recorded different host kinds ({sorted(kinds)}): calibrate a host "
            "whose GPUs are all of one model, with no GPU hidden by CUDA_VISIBLE_DEVICES"
        )
    if kinds:
        return kinds.pop()
    if saw_gpu:
        raise CalibrationError(
            "the workloads saw GPUs but recorded no host kind (a GPU model or interconnect "
            "gpufleet.matrix does not know): add the model to gpufleet/matrix/gpus.py first"
        )
    return calibration.CPU_MODEL, calibration.CPU_COUNT, calibration.CPU_INTERCONNECT


def _speed_metrics(doc: dict[str, Any]) -> dict[str, bool]:
    """A GPU-less host's figures worth a floor: each speed check's metric -> lower is better."""
    out = {}
    for workload in doc.get("workloads") or ():
        for check in workload.get("checks") or ():
            evidence = check.get("evidence") or {}
            metric = evidence.get("metric")
            if check.get("kind") == "speed" and isinstance(metric, str):
                name = dotted(str(workload.get("workload", "")), metric)  # as figures_from
                out[name] = bool(evidence.get("invert"))
    return out


def _one_value(value: object) -> float | None:
    """A figure as one number: per-GPU maps by their median (each GPU faces the floor)."""
    if _is_number(value):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, dict) and value and all(_is_number(v) for v in value.values()):
        return float(statistics.median(value.values()))
    return None


def collect(documents: list[dict[str, Any]], kind: tuple[str, int, str]) -> list[FigureRuns]:
    """Every figure with a floor (for a GPU kind: the kind's floors; GPU-less: the speed
    checks' figures), its value in each run."""
    is_cpu = kind[0] == calibration.CPU_MODEL
    floors: dict[str, Floor] = {} if is_cpu else {f.name: f for f in floors_for(*kind)}
    reference = calibfile.reference_floors(floors) if is_cpu else floors
    lower_better: dict[str, bool] = {}
    values: dict[str, list[float]] = {}
    for doc in documents:
        speed = _speed_metrics(doc) if is_cpu else {}
        lower_better.update(speed)
        for name, raw in figures_from(doc).items():
            if name not in floors and name not in speed:
                continue
            value = _one_value(raw)
            if value is not None:
                values.setdefault(name, []).append(value)
    out = []
    for name in sorted(values):
        ref = reference.get(name)
        bound = ref.bound if ref else ("max" if lower_better.get(name) else "min")
        unit = ref.unit if ref else ""
        out.append(FigureRuns(name, tuple(values[name]), unit, bound, floors.get(name)))
    return out


def _output_path(args: argparse.Namespace, kind: tuple[str, int, str], run_id: str) -> Path:
    path = args.output or DEFAULT_DIR / calibfile.file_name(*kind)
    if path.exists() and not args.force:
        kept = path.with_name(f"{path.stem}-{run_id}{path.suffix}")
        print(plain(f"{path} exists (not overwritten without --force): writing {kept}"))
        return kept
    return path


def _print_summary(rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="calibration", title_justify="left")
    for column in ("figure", "median", "spread", "floor derived", "published floor"):
        table.add_column(column, no_wrap=column != "figure")
    for row in rows:
        table.add_row(*(plain(c) for c in row))
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(table)


def calibrate(args: argparse.Namespace) -> int:
    """Run the full tier ``args.runs`` times on the one host, write the calibration file."""
    check_args(args)
    try:
        hosts = load_hosts(args.inventory, args.limit)
    except InventoryError as exc:
        raise CalibrationError(str(exc)) from None
    if len(hosts) != 1:
        names = ", ".join(h.name for h in hosts) or "none"
        raise CalibrationError(
            f"--limit {args.limit[0]} selects {len(hosts)} hosts ({names}); name exactly one host"
        )
    args.tier = calibfile.CALIBRATED_TIER
    documents, run_ids = [], []
    for index in range(args.runs):
        print(plain(f"calibration run {index + 1} of {args.runs} on {hosts[0].name}"))
        run_id = new_run_id()
        result = run_hosts(args, hosts, run_id)
        if isinstance(result, int):
            return result
        doc = result[0]
        why = refusal(doc)
        if why is not None:
            raise CalibrationError(
                f"run {run_id}: {hosts[0].name} is '{doc['status']}' ({why}); a host that "
                "fails validation is not known-good: fix it (or pick another), then calibrate"
            )
        if doc["status"] in BAD_STATUSES:
            print(plain(f"run {run_id}: only speed checks failed; their figures are recorded"))
        documents.append(doc)
        run_ids.append(run_id)
    kind = host_kind(documents)
    figures = collect(documents, kind)
    if not figures:
        raise CalibrationError("the runs reported no figure that has a floor: nothing to write")
    text = calibfile.render(
        kind,
        host=hosts[0].name,
        date=datetime.now(timezone.utc).date().isoformat(),
        margin=args.margin,
        figures=figures,
        run_ids=run_ids,
    )
    path = _output_path(args, kind, run_ids[-1])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        calibration.load(path)  # what was written must read back as the workloads read it
    except (OSError, FloorError) as exc:
        raise CalibrationError(f"cannot write {path}: {exc}") from None
    _print_summary(calibfile.summary_rows(figures, args.margin))
    print(plain(f"calibration written: {path}"))
    print(plain(f"review it, then set calibration_file = {str(path)!r} for this kind of host"))
    return 0


def run(args: argparse.Namespace) -> int:
    """``calibrate`` with its refusals as a clear message and exit status 2."""
    try:
        return calibrate(args)
    except CalibrationError as exc:
        print(plain(f"gpufleet validate --calibrate: {exc}"), file=sys.stderr)
        return 2
