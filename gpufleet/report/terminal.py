"""Results documents as rich tables: host by host, check by check, with the figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufleet.report.origins import floor_rows
from gpufleet.report.vendor_section import vendor_of
from gpufleet.text import cell

STATUS_STYLES = {
    "pass": "green",
    "fail": "bold red",
    "error": "bold magenta",
    "skipped": "dim",
    "inconclusive": "yellow",
    "unproven": "bold yellow",  # a run whose speed checks were inconclusive: not a pass
    # vendor verdicts (gpufleet.vendor.verdict)
    "skip": "dim",
    "warn": "yellow",
    "no_floor": "cyan",
}
# A run against its host's baseline (gpufleet.validate.baseline), as `gpufleet validate` notes it.
BASELINE_STYLES = {"new": "cyan", "ok": "green", "regressed": "yellow", "error": "magenta"}
# At most this many figures per check in the table; the results JSON keeps them all.
MAX_FIGURES = 4


def format_figure(value: Any) -> str:
    """A compact rendering of one figure: 3 significant digits, short lists, no nesting."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
            return f"[{format_figure(value[0])}, {format_figure(value[1])}]"
        return f"{len(value)} items" if len(value) > 3 else ", ".join(map(format_figure, value))
    if isinstance(value, Mapping):
        return f"{len(value)} entries"
    return str(value)


def format_figures(figures: Mapping[str, Any]) -> str:
    """One ``key=value`` line per figure: ``{"speedup": 1.2634}`` -> ``speedup=1.26``."""
    items = [f"{k}={format_figure(v)}" for k, v in figures.items()]
    extra = len(items) - MAX_FIGURES
    shown = items[:MAX_FIGURES] + ([f"(+{extra} more)"] if extra > 0 else [])
    return "\n".join(shown)


def host_table(doc: Mapping[str, Any]) -> Table:
    """One host's checks: status, check, message, figures."""
    summary = doc.get("summary", {})
    counts = ", ".join(f"{n} {s}" for s, n in summary.items() if n)
    title = cell(
        f"{doc['host']} ({doc.get('target', '')}) — {doc['tier']} tier — {counts or 'no checks'}"
    )
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("message", overflow="fold", max_width=70)
    table.add_column("figures", overflow="fold", max_width=48)
    for check in doc.get("checks", []):
        status = check["status"]
        table.add_row(
            cell(status, STATUS_STYLES.get(status, "")),
            cell(check["name"]),
            cell(check.get("message", "")),
            cell(format_figures(check.get("figures") or {})),
        )
    if doc.get("run_error"):
        table.add_row(cell("error", STATUS_STYLES["error"]), "run", cell(doc["run_error"]), "")
    note = doc.get("_baseline") or {}
    for line in note.get("lines", ()):
        state = note.get("state", "")
        table.add_row(cell(state, BASELINE_STYLES.get(state, "")), "baseline", cell(line), "")
    return table


def _gbps(value: Any) -> str:
    return "-" if value is None else f"{format_figure(float(value))} GB/s"


def vendor_table(doc: Mapping[str, Any]) -> Table | None:
    """DCGM's result (every failing or warning test by GPU) and the nccl-tests figures with
    their floor and its source; None when neither tool ran."""
    section = vendor_of(doc)
    dcgm, nccl = section["dcgm"], section["nccl_tests"]
    if dcgm is None and nccl is None:
        return None
    table = Table(title=cell(f"{doc['host']} — vendor diagnostics"), title_justify="left")
    for name, width in (("status", None), ("tool", None), ("result", 70), ("figures", 48)):
        table.add_column(name, overflow="fold", max_width=width, no_wrap=width is None)
    if dcgm is not None:
        level = f" -r {dcgm['level']}" if dcgm.get("level") is not None else ""
        tests = dcgm.get("tests") or []
        counts = {s: sum(t.get("status") == s for t in tests) for s in ("pass", "fail", "skip")}
        figures = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no tests recorded"
        status = str(dcgm.get("status"))
        table.add_row(
            cell(status, STATUS_STYLES.get(status, "")),
            cell(f"dcgmi diag{level}"),
            cell(str(dcgm.get("reason") or "")),
            cell(figures),
        )
        for test in tests:
            if test.get("status") in ("fail", "warn"):
                where = f"GPU {test['gpu']}" if test.get("gpu") is not None else "system"
                table.add_row(
                    cell(str(test["status"]), STATUS_STYLES.get("fail", "")),
                    cell(f"  {test.get('name')}"),
                    cell(f"{where}: {test.get('message') or ''}"),
                    "",
                )
    if nccl is not None:
        floor = nccl.get("floor") or {}
        lines = [
            f"busbw {_gbps(nccl.get('busbw_at_largest_gbps'))} at "
            f"{nccl.get('largest_size_bytes')} B",
            f"avg busbw {_gbps(nccl.get('avg_busbw_gbps'))}",
            f"#wrong {nccl.get('wrong')}",
        ]
        if floor:
            lines.append(f"floor {_gbps(floor.get('busbw_gbps'))} ({floor.get('source') or '?'})")
        status = str(nccl.get("status"))
        table.add_row(
            cell(status, STATUS_STYLES.get(status, "")),
            cell("nccl-tests all_reduce_perf"),
            cell(str(nccl.get("reason") or "")),
            cell("\n".join(lines)),
        )
    return table


ORIGIN_STYLES = {"calibration": "cyan", "published": "green", "choice": "yellow", "none": "dim"}


def floors_table(doc: Mapping[str, Any]) -> Table | None:
    """The floors the host's workloads faced, each figure beside it, and where the floor came
    from (calibration, a published figure, gpufleet's choice); None when no workload gave any."""
    rows = floor_rows(doc)
    if not rows:
        return None
    table = Table(title=cell(f"{doc['host']} — floors and their origins"), title_justify="left")
    for column in ("figure", "value", "floor", "from"):
        table.add_column(column, no_wrap=True)
    table.add_column("origin", overflow="fold", max_width=80)
    for row in rows:
        table.add_row(
            cell(row.name),
            cell(format_figure(row.figure) if row.figure is not None else "-"),
            cell(row.floor_text),
            cell(row.label, ORIGIN_STYLES.get(row.kind, "")),
            cell(row.origin),
        )
    return table


def baseline_cell(note: Mapping[str, Any] | None) -> Text:
    """The fleet table's baseline column: ``new``, ``ok``, ``2 regressed``, ``-``."""
    if not note or note.get("state") in (None, "none"):
        return Text("-", style="dim")
    state = note["state"]
    label = f"{len(note.get('lines', ()))} regressed" if state == "regressed" else state
    return Text(label, style=BASELINE_STYLES.get(state, ""))


def fleet_table(docs: Sequence[Mapping[str, Any]]) -> Table:
    """One row per host: overall status and counts per check status."""
    table = Table(title="fleet", title_justify="left")
    table.add_column("host", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for status in ("pass", "fail", "error", "inconclusive", "skipped"):
        table.add_column(status, justify="right")
    with_baseline = any("_baseline" in doc for doc in docs)
    if with_baseline:
        table.add_column("baseline", no_wrap=True)
    # a host that could not run has no check to count: its reason says why (review §3 item 5)
    with_reason = any(doc.get("run_error") for doc in docs)
    if with_reason:
        table.add_column("reason", overflow="fold", max_width=60)
    # Each host's file is DIR/<host>/RUN_ID.json: the line under the table says DIR once.
    for doc in docs:
        summary = doc.get("summary", {})
        why = str(doc.get("run_error") or "").strip().splitlines()
        table.add_row(
            cell(doc["host"]),
            cell(doc["status"], STATUS_STYLES.get(doc["status"], "")),
            *(str(summary.get(s, 0)) for s in ("pass", "fail", "error", "inconclusive", "skipped")),
            *([baseline_cell(doc.get("_baseline"))] if with_baseline else []),
            *([cell(why[0][:200] if why else "")] if with_reason else []),
        )
    # "error 0" on a host that could not run reads as no problem: counted apart, under it.
    unrun = [doc for doc in docs if doc.get("run_error") and not doc.get("checks")]
    if unrun:
        table.caption = f"{len(unrun)} of {len(docs)} host(s) could not run: no check ran there"
        table.caption_justify = "left"
    return table


def grouped(docs: Sequence[Mapping[str, Any]], shown: int = 5) -> list[Mapping[str, Any]]:
    """The documents to draw a table for: hosts that could not run for the same reason (an
    inventory problem of their group) share one table, titled with their names."""
    same: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for doc in docs:
        if doc.get("run_error") and not doc.get("checks"):
            same.setdefault((str(doc["run_error"]), str(doc.get("tier"))), []).append(doc)
    out: list[Mapping[str, Any]] = []
    for doc in docs:
        group = same.get((str(doc.get("run_error")), str(doc.get("tier"))), [doc])
        if len(group) == 1 or not any(d is doc for d in group):
            out.append(doc)
        elif doc is group[0]:
            names = [str(d["host"]) for d in group]
            listed = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
            out.append({**doc, "host": f"{len(names)} hosts ({listed})", "target": "same reason"})
    return out


def print_report(docs: Sequence[Mapping[str, Any]], console: Console | None = None) -> None:
    """Print every host's table, then the fleet summary."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and CI: wide enough that messages stay readable
            console = Console(width=160)
    for doc in grouped(docs):
        console.print(host_table(doc))
        vendor = vendor_table(doc)
        if vendor is not None:
            console.print(vendor)
        floors = floors_table(doc)
        if floors is not None:
            console.print(floors)
        console.print()
    console.print(fleet_table(docs))
