"""Calibration files: floors measured on a known-good host, replacing the published-derived ones.

Format (TOML, ``schema = 1``), one file per GPU model, GPU count and interconnect::

    schema = 1
    gpu_model = "NVIDIA H100 80GB HBM3"   # as nvidia-smi prints it, or the PCI device id
    gpu_count = 8
    interconnect = "nvswitch"             # a class of gpufleet.floors.derived.INTERCONNECTS
    host = "gpu01"                        # the host the operator declared healthy
    date = "2026-12-01"
    margin = 0.90                         # default for every figure below

    [figures."resnet50.images_per_s.amp"]
    values = [3010.0, 2985.5, 3022.1]     # one figure per full-tier run
    # margin = 0.85                       # optional, this figure only

A "min" floor becomes margin x the median of ``values``; a "max" floor (e.g. a spread)
becomes the median / margin. The spread recorded is (max - min) / median. With 2 runs or
more, ``between_run_sd`` records the spread between runs the verdicts use for the figure (the
sample sd of the log of ``values``, about the relative sd); without it (1 run, an older file)
the verdicts assume 5 %.

A GPU-less host (the sandbox) is calibrated as its own kind, ``gpu_model = "cpu"``,
``gpu_count = 0``, ``interconnect = "none"``: its figures are CPU timings, which no GPU host's
kind ever matches (``apply`` refuses it), and since gpufleet.floors.derived has no floors for it,
each figure makes its own floor (``bound`` and ``unit`` from the figure's table, "min" and ""
by default). ``gpufleet validate --calibrate`` writes these files (gpufleet.validate.calibrate).
A figure's old name (gpufleet.floors.names, e.g. ``gemm.fp16_fraction_of_peak``) is read as its
dotted name (``gemm.fraction_of_peak.fp16``) for one release.
"""

from __future__ import annotations

import difflib
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufleet.floors.derived import Floor, FloorError, canonical_interconnect, find_model
from gpufleet.floors.names import resolve

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 hosts use the tomli backport, where it is installed
    try:
        import tomli as tomllib
    except ImportError:  # the workloads on the host only parse JSON documents (parse())
        tomllib = None  # type: ignore[assignment]  # tomli is installed where mypy runs

SCHEMA = 1
# The kind of a GPU-less host: CPU figures, for testing the calibration path only.
CPU_MODEL, CPU_COUNT, CPU_INTERCONNECT = "cpu", 0, "none"
_TOP_KEYS = {"schema", "gpu_model", "gpu_count", "interconnect", "host", "date", "margin"}
_TOP_KEYS |= {"figures", "path"}  # path: where the runner read it (the workloads' origin text)
# spreads_only: the runner's mark for the quick tier (gpufleet.validate.calibfile)
_TOP_KEYS |= {"spreads_only"}
_FIGURE_KEYS = {"values", "margin", "spread", "unit", "bound", "between_run_sd"}
# Runs needed before calibration records a figure's spread between runs (between_run_sd).
MIN_RUNS_FOR_SD = 2


def between_run_sd(values: Sequence[float]) -> float | None:
    """The spread between runs of a figure: the sample sd of log(values), about the relative
    sd; None with fewer than MIN_RUNS_FOR_SD values or a value that is not > 0.

    Example:
        >>> round(between_run_sd([98.0, 100.0, 102.0]), 4)
        0.02
    """
    if len(values) < MIN_RUNS_FOR_SD or any(not v > 0 for v in values):
        return None
    return float(statistics.stdev(math.log(v) for v in values))


@dataclass(frozen=True)
class CalibratedFigure:
    """One figure's runs on the known-good host and the margin its floor uses."""

    name: str
    values: tuple[float, ...]
    margin: float
    unit: str = ""
    bound: str = "min"
    given: str = ""  # the name the file gave, where an old one (gpufleet.floors.names aliases)
    between_run_sd: float | None = None  # the file's between_run_sd: None where it has none

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def spread(self) -> float:
        return (max(self.values) - min(self.values)) / self.median if self.median else 0.0


@dataclass(frozen=True)
class Calibration:
    """A parsed calibration file."""

    path: str
    gpu_model: str
    gpu_count: int
    interconnect: str
    host: str
    date: str
    figures: dict[str, CalibratedFigure]

    @property
    def is_cpu(self) -> bool:
        """A GPU-less host's calibration (CPU figures): never applies to a GPU host."""
        return self.gpu_model == CPU_MODEL

    def describe(self) -> str:
        """``NVIDIA H100 80GB HBM3 x8 (nvswitch)``, or ``a GPU-less host (CPU figures)``."""
        if self.is_cpu:
            return "a GPU-less host (CPU figures)"
        return f"{self.gpu_model} x{self.gpu_count} ({self.interconnect})"


def _margin(raw: object, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= 1:
        raise FloorError(f"{where}: margin must be a number in (0, 1], got {raw!r}")
    return float(raw)


def _figure(name: str, raw: object, margin: float, where: str) -> CalibratedFigure:
    if not isinstance(raw, dict):
        raise FloorError(f"{where}: [figures.{name!r}] must be a table with 'values'")
    unknown = sorted(set(raw) - _FIGURE_KEYS)
    if unknown:
        raise FloorError(
            f"{where}: figures.{name!r} has unknown key(s) {', '.join(unknown)}; a figure "
            f"holds {', '.join(sorted(_FIGURE_KEYS))}"
        )
    unit, bound = raw.get("unit", ""), raw.get("bound", "min")
    if not isinstance(unit, str) or bound not in ("min", "max"):
        raise FloorError(f"{where}: figures.{name!r}: unit must be text, bound 'min' or 'max'")
    values = raw.get("values")
    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    ):
        raise FloorError(f"{where}: figures.{name!r}.values must be a non-empty list of numbers")
    own = _margin(raw["margin"], f"{where}: figures.{name!r}") if "margin" in raw else margin
    sd = raw.get("between_run_sd")
    if sd is not None and (
        isinstance(sd, bool) or not isinstance(sd, (int, float)) or not 0 <= sd < math.inf
    ):
        raise FloorError(
            f"{where}: figures.{name!r}.between_run_sd must be a finite number >= 0 (the sd of "
            f"log(values) between runs), got {sd!r}; delete it to assume 5 %"
        )
    if sd is not None and len(values) < MIN_RUNS_FOR_SD:
        raise FloorError(
            f"{where}: figures.{name!r} gives between_run_sd from {len(values)} run; a spread "
            f"needs {MIN_RUNS_FOR_SD} runs or more: delete it or add runs"
        )
    figure = CalibratedFigure(name, tuple(float(v) for v in values), own, unit, bound)
    return replace(figure, between_run_sd=None if sd is None else float(sd))


def _kind(gpu_model: str, gpu_count: object, interconnect: object, where: str) -> tuple:
    """(model name, count, interconnect) checked: a known GPU model, or the CPU kind."""
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int):
        raise FloorError(f"{where}: gpu_count must be an integer, got {gpu_count!r}")
    if gpu_model == CPU_MODEL:
        if (gpu_count, interconnect) != (CPU_COUNT, CPU_INTERCONNECT):
            raise FloorError(
                f"{where}: gpu_model 'cpu' (a GPU-less host) goes with gpu_count = 0 and "
                f"interconnect = 'none', got {gpu_count!r} and {interconnect!r}"
            )
        return CPU_MODEL, CPU_COUNT, CPU_INTERCONNECT
    return find_model(gpu_model).name, gpu_count, str(interconnect)


def parse(data: dict[str, Any], path: str = "<calibration>") -> Calibration:
    """A calibration from parsed TOML; FloorError says what is wrong and how to fix it."""
    if data.get("schema") != SCHEMA:
        raise FloorError(f"{path}: 'schema = {SCHEMA}' is required (got {data.get('schema')!r})")
    missing = [k for k in ("gpu_model", "gpu_count", "interconnect", "figures") if k not in data]
    if missing:
        raise FloorError(f"{path}: missing key(s) {', '.join(missing)}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise FloorError(
            f"{path}: unknown key(s) {', '.join(unknown)}; a calibration file holds "
            f"{', '.join(sorted(_TOP_KEYS - {'path', 'spreads_only'}))}"
        )
    model, count, interconnect = _kind(
        str(data["gpu_model"]), data["gpu_count"], data["interconnect"], path
    )
    margin = _margin(data.get("margin", 0.9), path)
    raw_figures = data["figures"]
    if not isinstance(raw_figures, dict) or not raw_figures:
        raise FloorError(f"{path}: [figures] must hold at least one figure")
    figures: dict[str, CalibratedFigure] = {}
    for given, raw in raw_figures.items():
        name = resolve(str(given))  # an old name (gemm.fp16_fraction_of_peak) as today's
        if name in figures:
            raise FloorError(
                f"{path}: figures {figures[name].given!r} and {given!r} are one figure, "
                f"{name!r} (an old name is read as today's, gpufleet/floors/names.py): keep one"
            )
        figures[name] = replace(_figure(str(given), raw, margin, path), name=name, given=given)
    return Calibration(
        path,
        model,
        count,
        interconnect,
        str(data.get("host", "")),
        str(data.get("date", "")),
        figures,
    )


def read_data(path: str | Path) -> dict[str, Any]:
    """One calibration file's parsed TOML, checked (``parse``), with ``path`` added: the
    document the runner hands to the workloads as ``--calibration``."""
    if tomllib is None:
        raise FloorError("reading a calibration TOML file needs Python >= 3.11 or tomli")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FloorError(f"cannot read calibration file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FloorError(f"{path} is not a text file: give a calibration TOML file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FloorError(f"{path} is not valid TOML: {exc}") from None
    data["path"] = str(path)
    parse(data, str(path))
    return data


def load(path: str | Path) -> Calibration:
    """Read and parse one calibration file."""
    return parse(read_data(path), str(path))


def apply(
    floors: Sequence[Floor], cal: Calibration, gpu_model: str, gpu_count: int, interconnect: str
) -> list[Floor]:
    """The floors with every calibrated figure's floor replaced, the origin naming the file.

    The file must be for the same model, count and interconnect; every figure must name a floor,
    except in a CPU calibration (``gpu_model`` "cpu"), where each figure makes its own floor.
    """
    asked = _kind(gpu_model, gpu_count, interconnect, "the host")
    asked = (*asked[:2], canonical_interconnect(asked[2], gpu_count))
    made = (cal.gpu_model, cal.gpu_count, canonical_interconnect(cal.interconnect, cal.gpu_count))
    if asked != made:
        what = f"{asked[0]} x{asked[1]} ({asked[2]})"
        what = "a GPU-less host" if asked[0] == CPU_MODEL else what
        raise FloorError(
            f"{cal.path} calibrates {cal.describe()}, not {what}: use a calibration file "
            "written on this kind of host (gpufleet validate --calibrate)"
        )
    if cal.is_cpu:  # no published floors for CPU timings: the file's figures are the floors
        floors = [
            Floor(f.name, None, f.unit, "no floor for CPU figures", f.bound)
            for f in cal.figures.values()
        ]
    names = [f.name for f in floors]
    unknown = sorted(set(cal.figures) - set(names))
    if unknown:
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FloorError(f"{cal.path}: no floor named {unknown[0]!r}{hint}")
    out = []
    for floor in floors:
        fig = cal.figures.get(floor.name)
        if fig is None:
            out.append(floor)
            continue
        value = fig.median * fig.margin if floor.bound == "min" else fig.median / fig.margin
        origin = (
            f"calibration ({cal.path}: median {fig.median:g} of {len(fig.values)} runs on "
            f"{cal.host or 'the calibrated host'}, spread {fig.spread:.1%}, x {fig.margin})"
        )
        figure = f"median {fig.median:g} {floor.unit} of {len(fig.values)} runs"
        where = cal.host or "this kind of host"
        config = f"{floor.config or 'the workload as it runs'}, on {where}"
        calibrated = replace(
            floor,
            value=round(value, 3),
            origin=origin,
            between_run_sd=fig.between_run_sd,
            spread_source=f"calibration {cal.path}" if fig.between_run_sd is not None else "",
        )
        out.append(calibrated.sourced(figure, config, f"calibration {cal.path}"))
    return out
