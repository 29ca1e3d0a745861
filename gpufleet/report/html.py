"""The fleet report as one self-contained HTML file: tables, inline SVG plots, no fetches.

Example: ``Path("report.html").write_text(render_html(load_fleet(Path("results"))))``
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from gpufleet import __version__
from gpufleet.report import plots
from gpufleet.report.figures import Figure, number
from gpufleet.report.fleet import Fleet, HostReport
from gpufleet.report.origins import floor_rows
from gpufleet.report.vendor_section import latest_vendor

TEMPLATE_DIR = Path(__file__).parent / "templates"
# A GPU temperature worth a look in the GPU table (most data-centre GPUs slow down from about
# 85-90 C; nvidia-smi -q shows each card's own slowdown temperature). Display only, no verdict.
HOT_C = 85
STATUS_LETTERS = {"pass": "✓", "fail": "✗", "error": "!", "skipped": "-", "inconclusive": "?"}

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
    undefined=jinja2.StrictUndefined,
    autoescape=True,  # messages come from hosts and logs: never raw HTML
    trim_blocks=True,
    lstrip_blocks=True,
)


def format_value(value: float | None, unit: str = "") -> str:
    """``1.2345`` -> ``1.23``; large values without decimals; the unit appended."""
    if value is None:
        return "—"
    text = f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if unit == "x":
        return f"{text}x"
    return f"{text} {unit}".strip()


def figure_cell(item: Figure | None) -> dict[str, Any]:
    """What one figure's table cell shows: the value, its threshold and a state for colour."""
    if item is None:
        return {"text": "", "threshold": "", "state": "absent", "title": "not measured"}
    if not item.applicable:
        state = "na"
    elif item.meets_threshold is None:
        state = "info"
    else:
        state = "pass" if item.meets_threshold else "fail"
    sign = "≥" if item.higher_is_better else "≤"
    threshold = f"{sign} {format_value(item.threshold, item.unit)}" if item.threshold else ""
    ci = f" (95 % CI {item.ci[0]:.3g} to {item.ci[1]:.3g})" if item.ci else ""
    note = " — not applicable here (no GPU): measured, not judged" if state == "na" else ""
    return {
        "text": format_value(item.value, item.unit),
        "threshold": threshold,
        "state": state,
        "title": f"{item.name} = {item.value:.4g}{ci}{note}",
    }


GPU_FIELDS: tuple[str, ...] = ("name", "pci_bus_id", "ecc_uncorrected_volatile")
GPU_FIELDS += ("remapped_rows_pending", "remapped_rows_failure")
GPU_NUMBERS = ("temperature_c", "power_draw_w")


def gpu_rows(gpus: Any) -> list[dict[str, Any]]:
    """The GPU table's rows from a document's ``gpu_health.gpus``, every field present and of
    the type the template needs (the document comes from the host; a bad entry shows as "—")."""
    rows = []
    for gpu in gpus if isinstance(gpus, list) else ():
        gpu = gpu if isinstance(gpu, dict) else {}
        row: dict[str, Any] = {key: gpu.get(key) for key in GPU_FIELDS}
        row.update({key: number(gpu.get(key)) for key in GPU_NUMBERS})
        reasons = gpu.get("clock_event_reasons_active")
        row["clock_event_reasons_active"] = (
            [str(r) for r in reasons] if isinstance(reasons, list) else []
        )
        rows.append(row)
    return rows


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def vendor_context(host: HostReport) -> dict[str, Any]:
    """The host's DCGM result (latest run) and nccl-tests figures (latest run that has them),
    every field the template reads present and printable."""
    found = latest_vendor(host.runs)
    dcgm, nccl = found["dcgm"], found["nccl_tests"]
    out: dict[str, Any] = {"dcgm": None, "nccl": None}
    if dcgm is not None:
        tests = [t for t in dcgm.get("tests") or () if isinstance(t, dict)]
        out["dcgm"] = {
            "status": _text(dcgm.get("status")),
            "level": _text(dcgm.get("level")),
            "reason": _text(dcgm.get("reason")),
            "run_id": _text(dcgm.get("run_id")),
            "counts": {
                s: sum(t.get("status") == s for t in tests)
                for s in ("pass", "fail", "skip", "warn")
            },
            "problems": [
                {
                    "name": _text(t.get("name")),
                    "gpu": "system" if t.get("gpu") is None else f"GPU {t['gpu']}",
                    "status": _text(t.get("status")),
                    "message": _text(t.get("message")),
                }
                for t in tests
                if t.get("status") in ("fail", "warn")
            ],
        }
    if nccl is not None:
        floor = nccl.get("floor") if isinstance(nccl.get("floor"), dict) else {}
        out["nccl"] = {
            "status": _text(nccl.get("status")),
            "reason": _text(nccl.get("reason")),
            "run_id": _text(nccl.get("run_id")),
            "busbw": format_value(number(nccl.get("busbw_at_largest_gbps")), "GB/s"),
            "largest": _text(nccl.get("largest_size_bytes")),
            "avg": format_value(number(nccl.get("avg_busbw_gbps")), "GB/s"),
            "wrong": _text(nccl.get("wrong")),
            "floor": format_value(number(floor.get("busbw_gbps")), "GB/s")
            if floor
            else "none known",
            "source": _text(floor.get("source")),
            "sizes": [
                {
                    "size": _text(r.get("size_bytes")),
                    "busbw": format_value(number(r.get("busbw_gbps")), "GB/s"),
                }
                for r in nccl.get("sizes") or ()
                if isinstance(r, dict)
            ],
        }
    return out


def host_context(host: HostReport, check_names: list[str], figure_keys: list[str]) -> dict:
    latest = host.latest
    checks = host.checks
    figures = {f.key: f for f in host.figures}
    return {
        "name": host.name,
        "anchor": "host-" + "".join(ch if ch.isalnum() else "-" for ch in host.name),
        "status": latest["status"],
        "tier": latest["tier"],
        "run_id": latest["run_id"],
        "started_at": latest["started_at"],
        "target": latest.get("target", ""),
        "run_error": latest.get("run_error"),
        "summary": latest["summary"],
        "runs": len(host.runs),
        "cells": [
            {
                "status": checks[name]["status"] if name in checks else "absent",
                "letter": STATUS_LETTERS.get(checks[name]["status"], "") if name in checks else "",
                "title": f"{name}: {checks[name]['status']}"
                + (f" — {checks[name]['message']}" if checks[name].get("message") else "")
                if name in checks
                else f"{name}: not run on this host",
            }
            for name in check_names
        ],
        "figure_cells": [figure_cell(figures.get(key)) for key in figure_keys],
        "problems_checks": [
            c for c in latest.get("checks", []) if c["status"] in ("fail", "error", "inconclusive")
        ],
        "drift": host.drift,
        "regressions": [r.message for r in host.regressions],
        "baseline_run_id": host.baseline["run_id"] if host.baseline else None,
        "baseline_note": host.baseline_note,
        "file_problems": host.problems,
        "gpus": gpu_rows((latest.get("gpu_health") or {}).get("gpus")),
        "floors": [
            {
                "name": r.name,
                "figure": format_value(number(r.figure), r.unit)
                if number(r.figure) is not None or r.figure is None
                else str(r.figure)[:60],
                "floor": r.floor_text,
                "kind": r.kind,
                "label": r.label,
                "origin": r.origin,
            }
            for r in floor_rows(latest)
        ],
        "history_svg": Markup(plots.history_svg(host)),  # our own SVG: safe
        "vendor": vendor_context(host),
    }


def check_columns(names: list[str]) -> list[dict[str, str]]:
    """Column headers: the group (``workloads``) and the short name (``xla``)."""
    columns = []
    for name in names:
        group, _, short = name.partition("::")
        columns.append({"name": name, "group": group if short else "", "short": short or name})
    return columns


def render_html(fleet: Fleet, *, title: str = "gpufleet report") -> str:
    """The whole report as one HTML document (plots inline, styles inline)."""
    check_names = fleet.check_names
    figure_keys: list[str] = []
    figure_names: dict[str, str] = {}  # key -> the one dotted name the header shows
    for host in fleet.hosts:
        for item in host.figures:
            if item.key not in figure_keys:
                figure_keys.append(item.key)
                figure_names[item.key] = item.name
    hosts = [host_context(h, check_names, figure_keys) for h in fleet.hosts]
    counts = {
        "hosts": len(hosts),
        "pass": sum(h["status"] == "pass" for h in hosts),
        "unproven": sum(h["status"] == "unproven" for h in hosts),
        "fail": sum(h["status"] == "fail" for h in hosts),
        "error": sum(h["status"] == "error" for h in hosts),
        "regressions": sum(bool(h["regressions"]) for h in hosts),
        "drift": sum(bool(h["drift"] and h["drift"].changes) for h in hosts),
    }
    groups: list[dict[str, Any]] = []
    for column in check_columns(check_names):
        if groups and groups[-1]["group"] == column["group"]:
            groups[-1]["span"] += 1
        else:
            groups.append({"group": column["group"], "span": 1})
    return _ENV.get_template("report.html.j2").render(
        title=title,
        hot_c=HOT_C,
        version=__version__,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        results_dir=str(fleet.root),
        margin=fleet.margin,
        counts=counts,
        columns=check_columns(check_names),
        groups=groups,
        figure_keys=figure_keys,
        figure_names=figure_names,
        hosts=hosts,
        speedups_svg=Markup(plots.speedups_svg(fleet)),
        scaling_svg=Markup(plots.scaling_svg(fleet)),
    )
