"""Calibration files on the control node: the inventory's ``calibration_file``, and writing one."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.floors import calibration
from gpufleet.floors.derived import Floor, FloorError

# The tier a calibration is made in (gpufleet validate --calibrate runs the full tier) and the
# only tier it is applied to: the quick tier runs smaller sizes on a GPU, so its figures are
# not the calibrated ones and would fail a full-tier floor on a healthy host.
CALIBRATED_TIER = "full"


def calibration_for(spec: Any, tier: str) -> dict[str, Any] | None:
    """The calibration document the workloads get as ``--calibration`` (None: no file); in
    the quick tier marked ``spreads_only``: its figures' between_run_sd judge the quick tier's
    single process, its floors do not apply. SpecError when the file is missing, unreadable,
    malformed or for another kind of host than the inventory declares (a CPU file for a GPU
    host, or the reverse)."""
    from gpufleet.spec import SpecError

    path = spec.calibration_file
    if not path:
        return None
    try:
        data = calibration.read_data(path)
        cal = calibration.parse(data, path)
    except FloorError as exc:
        raise SpecError(
            f"calibration_file: {exc}. Fix: point calibration_file at a file written by "
            "`gpufleet validate INVENTORY --calibrate --limit HOST` (paths are read on the "
            "control node, from the directory gpufleet runs in), or unset it."
        ) from None
    if cal.is_cpu and not spec.gpu_less:
        raise SpecError(
            f"calibration_file {path} holds CPU figures (gpu_model 'cpu') and can judge only a "
            "GPU-less host (gpu_less = true). Fix: calibrate on a healthy GPU host of this kind."
        )
    if not cal.is_cpu and spec.gpu_less:
        raise SpecError(
            f"calibration_file {path} calibrates {cal.describe()}, but this host is declared "
            "gpu_less. Fix: use that file for the GPU hosts of that kind only."
        )
    if not cal.is_cpu and spec.gpu_count is not None and spec.gpu_count != cal.gpu_count:
        raise SpecError(
            f"calibration_file {path} calibrates {cal.describe()}, but this host declares "
            f"gpu_count = {spec.gpu_count}. Fix: use a file written on a host of this kind."
        )
    return data if tier == CALIBRATED_TIER else data | {"spreads_only": True}


@dataclass(frozen=True)
class FigureRuns:
    """One figure over the calibration runs, with the floor it had before (if any)."""

    name: str
    values: tuple[float, ...]
    unit: str
    bound: str
    before: Floor | None


def file_name(gpu_model: str, gpu_count: int, interconnect: str) -> str:
    """``nvidia-h100-80gb-hbm3-8x-nvswitch.toml``; ``cpu-0x-none.toml`` for a GPU-less host."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_model.lower()).strip("-") or "gpu"
    return f"{slug}-{gpu_count}x-{interconnect}.toml"


def _toml(value: object) -> str:
    # JSON's strings (with \uXXXX escapes) and numbers are TOML basic strings and numbers.
    return json.dumps(value, ensure_ascii=True)


def derived_floor(fig: FigureRuns, margin: float) -> float:
    """The floor calibration.apply will derive from these runs."""
    cal = calibration.CalibratedFigure(fig.name, fig.values, margin, fig.unit, fig.bound)
    return cal.median * margin if fig.bound == "min" else cal.median / margin


def _sd_line(values: Sequence[float]) -> str:
    """The figure's between_run_sd line (the verdicts' spread), or a comment saying why none."""
    sd = calibration.between_run_sd(values)
    if sd is None:
        return (
            f"# between_run_sd: none ({len(values)} run; {calibration.MIN_RUNS_FOR_SD} or more "
            "needed): the verdicts assume 5 %"
        )
    return f"between_run_sd = {round(sd, 5)}"


def render(
    kind: tuple[str, int, str],
    *,
    host: str,
    date: str,
    margin: float,
    figures: Sequence[FigureRuns],
    run_ids: Sequence[str],
) -> str:
    """The calibration TOML for a reviewer: each figure's runs, spread and margin, with the
    floor it will get and the published-derived one it replaces as comments."""
    model, count, interconnect = kind
    lines = [
        f"# Written by `gpufleet validate --calibrate` from {len(run_ids)} full-tier runs on "
        f"{host} ({', '.join(run_ids)}).",
        "# Review it before an inventory's calibration_file names it: every figure below "
        "replaces its floor",
        "# (margin x the median of its values; a 'max' floor: the median / margin) on every "
        "host of this kind.",
    ]
    if model == calibration.CPU_MODEL:
        lines.append("# A GPU-less host: CPU figures, which never judge a GPU host.")
    lines += [
        f"schema = {calibration.SCHEMA}",
        f"gpu_model = {_toml(model)}",
        f"gpu_count = {count}",
        f"interconnect = {_toml(interconnect)}",
        f"host = {_toml(host)}",
        f"date = {_toml(date)}",
        f"margin = {margin}",
    ]
    for fig in figures:
        cal = calibration.CalibratedFigure(fig.name, fig.values, margin)
        sign = ">=" if fig.bound == "min" else "<="
        before = fig.before
        was = (
            f"{before.value:g} {before.unit}: {before.origin}"
            if before is not None and before.value is not None
            else "none (the figure was reported only)"
        )
        lines += [
            "",
            f"[figures.{_toml(fig.name)}]",
            f"# floor {sign} {derived_floor(fig, margin):.4g} {fig.unit}".rstrip(),
            f"# replaces: {was}"[:300],
            f"values = [{', '.join(repr(float(v)) for v in fig.values)}]",
            f"spread = {round(cal.spread, 4)}",
            _sd_line(fig.values),
            f"unit = {_toml(fig.unit)}",
            f"bound = {_toml(fig.bound)}",
        ]
    return "\n".join(lines) + "\n"


def summary_rows(figures: Sequence[FigureRuns], margin: float) -> list[tuple[str, ...]]:
    """(figure, median, spread, floor derived, published floor) for the terminal table."""
    rows: list[tuple[str, ...]] = []
    for fig in figures:
        cal = calibration.CalibratedFigure(fig.name, fig.values, margin)
        sign = ">=" if fig.bound == "min" else "<="
        before = fig.before
        published = (
            f"{sign} {before.value:g}"
            if before is not None and before.value is not None and before.origin.startswith("pub")
            else "-"
        )
        rows.append(
            (
                fig.name,
                f"{cal.median:.4g} {fig.unit}".strip(),
                f"{cal.spread:.1%} ({len(fig.values)} runs)",
                f"{sign} {derived_floor(fig, margin):.4g}",
                published,
            )
        )
    return rows


def reference_floors(kinds: Mapping[str, Floor] | None = None) -> dict[str, Floor]:
    """Every floor name of the matrix (8-GPU NVSwitch and 1-GPU hosts of every known model):
    where a CPU figure shares a name with one, its unit and bound come from there."""
    from gpufleet.floors.derived import floors_for, known_models

    out: dict[str, Floor] = dict(kinds or {})
    for model in known_models():
        for count, link in ((8, "nvswitch"), (1, "single_gpu")):
            for floor in floors_for(model, count, link):
                out.setdefault(floor.name, floor)
    return out
