"""The HTML report's plots, drawn with matplotlib as inline SVG (text kept as text, no fetches).

Example: ``svg = speedups_svg(fleet)`` -> ``"<svg ...>...</svg>"`` or ``""`` when there is
nothing to draw.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gpufleet.report.figures import Figure, figures_of
from gpufleet.report.fleet import Fleet, HostReport

PASS_COLOR = "#2e7d32"
FAIL_COLOR = "#c62828"
NEUTRAL_COLOR = "#5c6bc0"
NA_COLOR = "#b0b7c3"
THRESHOLD_COLOR = "#37474f"
SERIES = ("#1e88e5", "#f4511e", "#43a047", "#8e24aa", "#fdd835", "#00897b", "#6d4c41", "#d81b60")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError(
            "the HTML report's plots need matplotlib: pip install 'matplotlib==3.10.7'"
        ) from None
    matplotlib.use("Agg")
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: small files, the page's own fonts
            "svg.hashsalt": "gpufleet",  # the same data draws the same SVG
            "font.family": "sans-serif",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 10,
            "axes.titleweight": "bold",
            # Host names and metric keys come from the documents: "$" is a dollar, not TeX.
            "text.parse_math": False,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _svg(plt: Any, fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    # Inline in HTML: drop the XML prolog and DOCTYPE, keep the <svg> element.
    return text[text.index("<svg") :]


def _color(item: Figure) -> str:
    if not item.applicable:
        return NA_COLOR
    verdict = item.meets_threshold
    if verdict is None:
        return NEUTRAL_COLOR
    return PASS_COLOR if verdict else FAIL_COLOR


def _panel(ax: Any, title: str, hosts: Sequence[str], items: Sequence[Figure | None]) -> None:
    positions = list(range(len(hosts)))
    values = [item.value if item else 0.0 for item in items]
    colors = [_color(item) if item else "none" for item in items]
    ax.bar(positions, values, color=colors, width=0.65, edgecolor="none")
    for pos, item in zip(positions, items, strict=True):
        if item is None:
            ax.text(pos, 0, "not run", ha="center", va="bottom", fontsize=7, color="#777")
            continue
        label = f"{item.value:.2f}" + ("\nn/a" if not item.applicable else "")
        ax.text(pos, item.value, label, ha="center", va="bottom", fontsize=7)
        if item.threshold is not None:
            ax.hlines(
                item.threshold,
                pos - 0.42,
                pos + 0.42,
                colors=THRESHOLD_COLOR,
                linestyles="--",
                linewidth=1.2,
            )
    ax.set_title(title)
    ax.set_xticks(
        positions,
        hosts,
        rotation=30 if len(hosts) > 4 else 0,
        ha="right" if len(hosts) > 4 else "center",
    )
    top = max([v for v in values] + [i.threshold or 0 for i in items if i] + [0.1])
    ax.set_ylim(0, top * 1.25)
    ax.grid(axis="y", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def _figure_panels(fleet: Fleet, kinds: Sequence[str], ylabel: str) -> str:
    keys: list[str] = []
    for host in fleet.hosts:
        for item in host.figures:
            if item.kind in kinds and item.key not in keys:
                keys.append(item.key)
    if not keys:
        return ""
    plt = _pyplot()
    hosts = [host.name for host in fleet.hosts]
    columns = min(3, len(keys))
    rows = math.ceil(len(keys) / columns)
    width = max(3.2, 0.45 * len(hosts) + 1.6)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, 2.9 * rows), squeeze=False)
    for index, key in enumerate(keys):
        ax = axes[index // columns][index % columns]
        items = [next((f for f in host.figures if f.key == key), None) for host in fleet.hosts]
        _panel(ax, key, hosts, items)
        if index % columns == 0:
            ax.set_ylabel(ylabel)
    for index in range(len(keys), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    fig.tight_layout()
    return _svg(plt, fig)


def speedups_svg(fleet: Fleet) -> str:
    """Speed-ups per host, one panel per workload variant, the threshold dashed."""
    return _figure_panels(fleet, ("speedup",), "speed-up (x)")


def scaling_svg(fleet: Fleet) -> str:
    """MirroredStrategy scaling efficiency per host against its threshold."""
    return _figure_panels(fleet, ("scaling_efficiency",), "efficiency")


def _when(doc: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(doc.get("started_at")).replace("Z", "+00:00"))
    except ValueError:
        return None


def history_svg(host: HostReport) -> str:
    """One host's speed-ups and scaling efficiency run after run; the baseline run marked."""
    series: dict[str, list[tuple[datetime, float, bool]]] = {}
    for doc in host.runs:
        when = _when(doc)
        if when is None:
            continue
        for item in figures_of(doc):
            # The N-GPU throughput ratio (~N) would flatten every other line.
            if item.kind == "scaling_efficiency" or (
                item.kind == "speedup" and item.variant != "all_gpus"
            ):
                series.setdefault(item.key, []).append((when, item.value, item.applicable))
    if not series or len(host.runs) < 2:
        return ""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    for index, (key, points) in enumerate(sorted(series.items())):
        color = SERIES[index % len(SERIES)]
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            markersize=3,
            linewidth=1.3,
            color=color,
            label=key,
        )
    if host.baseline is not None and (when := _when(host.baseline)) is not None:
        ax.axvline(when, color=THRESHOLD_COLOR, linestyle=":", linewidth=1)
        ax.annotate(
            "baseline",
            (when, 1),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            ha="left",
            va="top",
            xytext=(3, 0),
            textcoords="offset points",
        )
    ax.set_ylabel("ratio")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", color="#e0e0e0", linewidth=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _svg(plt, fig)
