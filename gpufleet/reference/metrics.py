"""docs/reference/metrics.md: every Prometheus metric gpufleet writes, found in the code itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpufleet.floors.names import NAMES, FigureName
from gpufleet.reference.markdown import page, table
from gpufleet.report.metric_units import RENAMED, base_unit_help

REPO = Path(__file__).resolve().parents[2]
_HELP_LINE = re.compile(r"# HELP (gpufleet_[a-z0-9_]+) (.+)")
# Which textfile a module's metrics go to.
_FILES = (
    ("gpufleet/cluster/", "gpufleet-cluster.prom (cluster tier)"),
    ("gpufleet/rollout/", "`gpufleet rollout --textfile PATH`"),
    ("gpufleet/report/", "gpufleet.prom (periodic run, on each host)"),
)


def _families(path: Path) -> list[tuple[str, str]]:
    """(name, help) of every ``Family("gpufleet_...", "help")`` call and ``# HELP`` literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            name, text = node.args[0], node.args[1]
            if (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and name.value.startswith("gpufleet_")
                and isinstance(text, ast.Constant)
                and isinstance(text.value, str)
            ):
                found.append((name.value, text.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _HELP_LINE.match(node.value)
            if match:
                found.append((match[1], match[2]))
    return found


def metrics() -> dict[str, tuple[str, str]]:
    """Metric name -> (help text, where it is written), the base-unit twins included."""
    out: dict[str, tuple[str, str]] = {}
    for path in sorted((REPO / "gpufleet").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        where = next((w for prefix, w in _FILES if rel.startswith(prefix)), None)
        if where is None:
            continue
        for name, text in _families(path):
            out.setdefault(name, (text, where))
    for old, (new, _factor) in RENAMED.items():
        if old in out:
            text, where = out[old]
            out[new] = (base_unit_help(old, text), where)
            out[old] = (f"Old name of `{new}`, kept for one release. {text}", where)
    return dict(sorted(out.items()))


INTRO = """\
Every metric gpufleet writes, all gauges, in node_exporter's textfile format. The labels,
the dashboard and the alert rules: [../howto/monitoring.md](../howto/monitoring.md)."""


NAMES_INTRO = """\
## Figure names

One dotted name per judged figure (gpufleet/floors/names.py): `gpufleet thresholds` prints its
floor under it, the report shows it (`gpufleet report --json`: `name`; `key` stays the
baseline's WORKLOAD/METRIC), and the textfile writes a workload's figure with it as the
`figure` label, in the family below and in `gpufleet_workload_figure` (the nccl-tests and
cluster families are the figure's own). `--figure-margin` and `thresholds --judge` take it or
an old name; the old names are aliases for one release. The inventory key is the
`thresholds` entry that sets this floor over the published one and calibration (0: not set),
or, marked "(thresholds.toml)", the key the workload judges the figure against itself (its
default there, or the inventory's value). "older gpufleet": a figure only older versions wrote,
named for kept results and baselines."""


def _key(entry: FigureName) -> str:
    if entry.inventory_key:
        return f"`{entry.inventory_key}`"
    return f"`{entry.threshold_key}` (thresholds.toml)" if entry.threshold_key else ""


def figure_names() -> str:
    """The figure-name table: name, unit, inventory key, textfile family, old names."""
    rows = [
        [
            f"`{e.name}`",
            e.unit,
            _key(e),
            f"`{e.prometheus}` ({e.prometheus_unit})" if e.prometheus else "not written",
            ", ".join(f"`{a}`" for a in e.aliases) + ("; older gpufleet" if e.legacy else ""),
        ]
        for e in sorted(NAMES.values(), key=lambda e: e.name)
    ]
    head = ["figure", "unit", "inventory key", "textfile family", "old names (aliases)"]
    return NAMES_INTRO + "\n\n" + table(head, rows)


def render() -> str:
    rows = [[f"`{name}`", text, where] for name, (text, where) in metrics().items()]
    metrics_table = table(["metric", "meaning", "written to"], rows)
    return page("Prometheus metrics", INTRO, metrics_table, figure_names())
