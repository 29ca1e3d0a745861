"""Where each judged figure's floor came from: calibration, a published figure, or a choice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.floors.checks import figures_from

# How a results document names a floor's origin (gpufleet.floors.derived and .calibration write
# the text; these are its first words): the label the report shows for each.
ORIGIN_LABELS = {
    "calibration": "calibration",
    "published": "published figure",
    "choice": "gpufleet's choice",
    "derived": "derived from another floor",
    "none": "no floor (reported only)",
}


@dataclass(frozen=True)
class FloorRow:
    """One floor a workload asked for, its figure in the same document and where it came from."""

    workload: str
    name: str
    value: float | None
    unit: str
    bound: str
    origin: str
    kind: str
    figure: object

    @property
    def label(self) -> str:
        return ORIGIN_LABELS[self.kind]

    @property
    def floor_text(self) -> str:
        if self.value is None:
            return "-"
        sign = ">=" if self.bound == "min" else "<="
        return f"{sign} {self.value:g} {self.unit}".strip()


def origin_kind(origin: object, value: object) -> str:
    """``calibration``, ``published``, ``choice``, ``derived`` or ``none`` (no floor value)."""
    text = str(origin or "").strip().lower()
    if value is None:
        return "none"
    if text.startswith("calibration"):
        return "calibration"
    if text.startswith("published"):
        return "published"
    if "gpufleet's choice" in text:
        return "choice"
    return "derived"


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def floor_rows(document: Mapping[str, Any]) -> list[FloorRow]:
    """Every floor in the document's workloads' ``config.floors``, with its figure."""
    rows = []
    for workload in document.get("workloads") or ():
        if not isinstance(workload, Mapping):
            continue
        config = workload.get("config")
        floors = config.get("floors") if isinstance(config, Mapping) else None
        if not isinstance(floors, Mapping):
            continue
        try:
            figures = figures_from(dict(workload))
        except ValueError:  # a malformed metrics map: show the floors without figures
            figures = {}
        for name, entry in sorted(floors.items()):
            entry = entry if isinstance(entry, Mapping) else {}
            value = _number(entry.get("value"))
            rows.append(
                FloorRow(
                    workload=str(workload.get("workload", "")),
                    name=str(name),
                    value=value,
                    unit=str(entry.get("unit") or ""),
                    bound="max" if entry.get("bound") == "max" else "min",
                    origin=str(entry.get("origin") or ""),
                    kind=origin_kind(entry.get("origin"), value),
                    figure=figures.get(str(name)),
                )
            )
    return rows


def origin_counts(rows: list[FloorRow]) -> dict[str, int]:
    """How many floors of each origin: ``{"calibration": 3, "published": 5, ...}``."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.kind] = counts.get(row.kind, 0) + 1
    return counts
