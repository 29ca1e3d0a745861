"""A results document as Prometheus metrics in node_exporter's textfile collector format.

Standard library only: this module runs on the GPU hosts (validation.periodic) as well as on the
control node. Example::

    text = render(document, last_success=previous_last_success(path))
    write_textfile(path, text)   # temp file in the same folder, fsync, rename

Every family is a gauge with HELP and TYPE lines. Labels never carry the host name (Prometheus
adds ``instance`` when it scrapes node_exporter), except the vendor families
(gpufleet.report.prometheus_vendor: DCGM's result, nccl-tests' busbw), which name the host.
Label values are escaped as the text format asks (backslash, double quote, line feed).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from gpufleet.floors.names import name_of_key
from gpufleet.report.figures import figures_of, number
from gpufleet.report.metric_units import RENAMED, base_unit_help, deprecated_help
from gpufleet.report.prometheus_vendor import vendor_families

TEXTFILE_NAME = "gpufleet.prom"
CHECK_STATUSES = ("pass", "fail", "skipped", "error", "inconclusive")
VERDICTS = ("pass", "fail", "inconclusive", "not_applicable")
# Clock event reasons that mean a slowed GPU (gpufleet.health.THROTTLING_REASONS, repeated
# here so that this module imports nothing but the standard library and figures).
THROTTLING_REASONS = frozenset(
    {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
)
LAST_SUCCESS = "gpufleet_last_success_timestamp_seconds"

Labels = Mapping[str, str]


class Family:
    """One metric family: name, help text and its samples (labels, value)."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help_text = help_text
        self.samples: list[tuple[dict[str, str], float]] = []

    def add(self, value: float | bool, **labels: Any) -> None:
        self.samples.append(({k: str(v) for k, v in labels.items()}, float(value)))


def escape_label(value: str) -> str:
    r"""Escape a label value: backslash, double quote and line feed (``\\``, ``\"``, ``\n``)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as the text format writes it: ``1``, ``0.25``, ``NaN``, ``+Inf``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def with_base_units(families: Iterable[Family]) -> list[Family]:
    """The families, each one in RENAMED followed by its twin in Prometheus base units."""
    out: list[Family] = []
    for family in families:
        if family.name not in RENAMED:
            out.append(family)
            continue
        new_name, factor = RENAMED[family.name]
        twin = Family(new_name, base_unit_help(family.name, family.help_text))
        twin.samples = [(dict(labels), value * factor) for labels, value in family.samples]
        alias = Family(family.name, deprecated_help(family.name, family.help_text))
        alias.samples = family.samples
        out += [twin, alias]
    return out


def format_families(families: Iterable[Family]) -> str:
    """The text exposition format (version 0.0.4) of the families that have samples; a family
    in an old unit comes with its twin in base units (gpufleet.report.metric_units)."""
    lines = []
    for family in with_base_units(families):
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {_escape_help(family.help_text)}")
        lines.append(f"# TYPE {family.name} gauge")
        for labels, value in family.samples:
            inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in sorted(labels.items()))
            selector = f"{{{inner}}}" if inner else ""
            lines.append(f"{family.name}{selector} {format_value(value)}")
    return "\n".join(lines) + "\n"


def timestamp(iso: str | None) -> float | None:
    """Seconds since the epoch of an ISO 8601 time (``2026-11-30T08:50:00+00:00``), or None."""
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _run_families(doc: Mapping[str, Any], last_success: float | None) -> list[Family]:
    finished = timestamp(doc.get("finished_at")) or timestamp(doc.get("started_at"))
    succeeded = doc.get("status") == "pass"
    if succeeded and finished is not None:
        last_success = finished
    info = Family("gpufleet_run_info", "The last run of the gpufleet checks (value always 1).")
    # No run_id label: a new value every run would start a new series every run.
    info.add(1, tier=doc.get("tier", ""), status=doc.get("status", ""))
    success = Family("gpufleet_run_success", "1 when the last run passed, else 0.")
    success.add(succeeded)
    last_run = Family(
        "gpufleet_last_run_timestamp_seconds", "When the last run finished, seconds since epoch."
    )
    if finished is not None:
        last_run.add(finished)
    last_ok = Family(
        LAST_SUCCESS,
        "When the last passing run finished, seconds since epoch (0: none has passed yet).",
    )
    last_ok.add(last_success or 0.0)
    duration = Family("gpufleet_run_duration_seconds", "How long the last run took.")
    if number(doc.get("duration_s")) is not None:
        duration.add(float(doc["duration_s"]))
    error = Family(
        "gpufleet_run_error", "1 when the last run could not complete (see the results JSON)."
    )
    error.add(bool(doc.get("run_error")))
    unproven = Family(
        "gpufleet_run_unproven",
        "1 when nothing failed but a check (a speed verdict) was inconclusive: not a pass.",
    )
    unproven.add(doc.get("status") == "unproven")
    return [info, success, last_run, last_ok, duration, error, unproven]


def _check_families(doc: Mapping[str, Any]) -> list[Family]:
    passed = Family(
        "gpufleet_check_passed",
        "1 when the check passed, 0 when it failed, errored or was inconclusive "
        "(skipped checks are left out).",
    )
    status = Family(
        "gpufleet_check_status", "The check's status: 1 for the status it has, 0 for the others."
    )
    for check in doc.get("checks") or ():
        name, state = str(check.get("name", "")), str(check.get("status", ""))
        if state != "skipped":
            passed.add(state == "pass", check=name)
        for candidate in CHECK_STATUSES:
            status.add(candidate == state, check=name, status=candidate)
    totals = Family("gpufleet_checks", "Number of checks per status in the last run.")
    for state, count in (doc.get("summary") or {}).items():
        totals.add(float(count), status=state)
    return [passed, status, totals]


def _workload_families(doc: Mapping[str, Any]) -> list[Family]:
    verdict = Family(
        "gpufleet_workload_verdict", "The workload's verdict: 1 for its verdict, 0 for the others."
    )
    for workload in doc.get("workloads") or ():
        name = str(workload.get("workload", ""))
        state = str((workload.get("verdict") or {}).get("status", ""))
        for candidate in VERDICTS:
            verdict.add(candidate == state, workload=name, verdict=candidate)
    speedup = Family(
        "gpufleet_speedup_ratio", "Speed-up of a variant over its baseline (time before / after)."
    )
    speedup_min = Family("gpufleet_speedup_threshold_ratio", "The speed-up the check asks for.")
    scaling = Family(
        "gpufleet_scaling_efficiency_ratio",
        "MirroredStrategy scaling efficiency: (throughput on N GPUs / on 1) / N.",
    )
    scaling_min = Family(
        "gpufleet_scaling_efficiency_threshold_ratio", "The scaling efficiency the check asks for."
    )
    figure = Family(
        "gpufleet_workload_figure", "Every headline figure of every workload, in its own unit."
    )
    figure_min = Family(
        "gpufleet_workload_figure_threshold",
        "The threshold of a headline figure (a floor, or a ceiling for slowdowns).",
    )
    for item in figures_of(doc):
        # figure: the one dotted name (gpufleet.floors.names) thresholds and the report use.
        labels = {"workload": item.workload, "variant": item.variant, "figure": item.name}
        if item.kind == "speedup":
            speedup.add(item.value, **labels)
            if item.threshold is not None:
                speedup_min.add(item.threshold, **labels)
        elif item.kind == "scaling_efficiency":
            scaling.add(item.value, **labels)
            if item.threshold is not None:
                scaling_min.add(item.threshold, **labels)
        named = {"workload": item.workload, "metric": item.metric, "figure": item.name}
        figure.add(item.value, kind=item.kind, **named)
        if item.threshold is not None:
            figure_min.add(item.threshold, **named)
    return [verdict, speedup, speedup_min, scaling, scaling_min, figure, figure_min]


def _gpu_families(health: Mapping[str, Any] | None) -> list[Family]:
    count = Family("gpufleet_gpu_count", "GPUs nvidia-smi reported in the last run.")
    ecc = Family(
        "gpufleet_gpu_ecc_uncorrected_volatile_errors",
        "Uncorrectable volatile ECC errors since the driver loaded.",
    )
    pending = Family("gpufleet_gpu_remapped_rows_pending", "1 when a row remap awaits a reset.")
    failure = Family("gpufleet_gpu_remapped_rows_failure", "1 when a row remap has failed.")
    temperature = Family("gpufleet_gpu_temperature_celsius", "GPU temperature.")
    power = Family("gpufleet_gpu_power_draw_watts", "GPU power draw.")
    reason = Family(
        "gpufleet_gpu_clock_event_reason_active",
        "1 per clock event (throttle) reason active when nvidia-smi was sampled.",
    )
    throttled = Family(
        "gpufleet_gpu_throttled",
        "1 when a slowdown reason (hardware, thermal, power brake) was active.",
    )
    findings = Family(
        "gpufleet_gpu_health_findings", "GPU health findings of the last run, per check."
    )
    if health is None:
        return [count]
    gpus = health.get("gpus") or []
    count.add(len(gpus))
    for index, gpu in enumerate(gpus):
        labels = {
            "gpu": str(index),
            "name": str(gpu.get("name") or ""),
            "uuid": str(gpu.get("uuid") or ""),
            "pci_bus_id": str(gpu.get("pci_bus_id") or ""),
        }
        # DCGM exporter's label names too, so gpufleet_gpu_* joins DCGM_FI_DEV_* on UUID
        labels |= {"UUID": labels["uuid"], "modelName": labels["name"]}
        measured = (
            (ecc, "ecc_uncorrected_volatile"),
            (temperature, "temperature_c"),
            (power, "power_draw_w"),
        )
        for family, key in measured:
            value = number(gpu.get(key))
            if value is not None:
                family.add(value, **labels)
        for family, key in ((pending, "remapped_rows_pending"), (failure, "remapped_rows_failure")):
            if gpu.get(key) is not None:
                family.add(bool(gpu[key]), **labels)
        active = [_reason(r) for r in gpu.get("clock_event_reasons_active") or ()]
        for name in active:
            reason.add(1, gpu=str(index), reason=name)
        throttled.add(any(r in THROTTLING_REASONS for r in active), **labels)
    tally: dict[tuple[str, str], int] = {}
    for finding in health.get("findings") or ():
        pair = (str(finding.get("check", "")), str(finding.get("severity", "")))
        tally[pair] = tally.get(pair, 0) + 1
    for (check, severity), n in sorted(tally.items()):
        findings.add(n, check=check, severity=severity)
    return [count, ecc, pending, failure, temperature, power, reason, throttled, findings]


def _reason(raw: str) -> str:
    name = raw.strip().lower()
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_", "clocks_event_reasons_"):
        name = name.removeprefix(prefix)
    return name


REGRESSION_STATES = ("gathering", "ok", "regressed")


def _regression_families(regression: Mapping[str, Any] | None) -> list[Family]:
    """The host's state against its tier's baseline (validation.periodic fills it in)."""
    if not regression:
        return []
    state = Family(
        "gpufleet_regression_state",
        "Against this tier's baseline: gathering (baseline runs still being collected), ok or "
        "regressed; 1 for the state it is in.",
    )
    for candidate in REGRESSION_STATES:
        state.add(candidate == regression.get("state"), state=candidate)
    runs = Family("gpufleet_baseline_runs", "Runs in this tier's baseline, and how many it wants.")
    runs.add(float(regression.get("runs", 0)), kind="have")
    runs.add(float(regression.get("wanted", 0)), kind="wanted")
    regressed = Family(
        "gpufleet_figure_regressed", "1 when the figure regressed (or vanished) since the baseline."
    )
    cusum = Family(
        "gpufleet_figure_regression_cusum",
        "The figure's CUSUM of shortfalls against its baseline, in run-to-run sds.",
    )
    for key, figure in sorted((regression.get("figures") or {}).items()):
        labels = {"figure": name_of_key(key), "key": key}  # the dotted name; the baseline's
        regressed.add(figure.get("status") == "regressed", **labels)
        if number(figure.get("statistic")) is not None:
            cusum.add(float(figure["statistic"]), **labels)
    return [state, runs, regressed, cusum]


def families(
    doc: Mapping[str, Any],
    *,
    last_success: float | None = None,
    regression: Mapping[str, Any] | None = None,
) -> list[Family]:
    """The metric families of one results document (see :func:`render`)."""
    return [
        *_run_families(doc, last_success),
        *_check_families(doc),
        *_workload_families(doc),
        *_gpu_families(doc.get("gpu_health")),
        *vendor_families(doc, Family),
        *_regression_families(regression),
    ]


def render(
    doc: Mapping[str, Any],
    *,
    last_success: float | None = None,
    regression: Mapping[str, Any] | None = None,
) -> str:
    """The textfile for one results document.

    ``last_success`` is the previous last-success time, kept when this run did not pass
    (read it with :func:`previous_last_success`). ``regression`` is the host's state against
    its tier's baseline: ``{"state", "runs", "wanted", "figures": {key: {"status",
    "statistic"}}}``.
    """
    return format_families(families(doc, last_success=last_success, regression=regression))


_LAST_SUCCESS_LINE = re.compile(rf"^{LAST_SUCCESS}(?:\{{\}})?\s+(\S+)\s*$", re.MULTILINE)


def previous_last_success(path: str | Path) -> float | None:
    """The last-success time in an earlier textfile, or None (no file, no such line, or 0)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    match = _LAST_SUCCESS_LINE.search(text)
    if match is None:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def write_textfile(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: node_exporter never reads half a file.

    The temp file lives in the same folder (a rename is atomic only within one file system)
    and is named ``.<name>.*`` so that the collector, which reads ``*.prom`` only, skips it.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def write_for_document(doc: Mapping[str, Any], textfile_dir: str | Path) -> Path:
    """Render ``doc`` into ``DIR/gpufleet.prom``, carrying the last success over; returns it."""
    path = Path(textfile_dir) / TEXTFILE_NAME
    write_textfile(path, render(doc, last_success=previous_last_success(path)))
    return path
