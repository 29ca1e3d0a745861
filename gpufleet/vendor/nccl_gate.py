"""Judge an nccl-tests all-reduce figure against the floors table (pure, no I/O)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpufleet.floors.nccl import FLOORS, INTERCONNECT_CLASSES, NcclFloor, find_floor
from gpufleet.parsers.nccl import NcclTestsResult
from gpufleet.vendor.verdict import Verdict

CHECK = "nccl_allreduce"


@dataclass(frozen=True)
class NcclFigure:
    """The figures gpufleet judges and records for one ``all_reduce_perf`` run."""

    avg_busbw: float | None  # GB/s, nccl-tests' "Avg bus bandwidth" over all sizes
    largest_busbw: float | None  # GB/s at the largest message size, better placement
    largest_size: int | None  # bytes
    max_busbw: float | None  # GB/s, best of any size
    wrong: int  # #wrong total (+ starred errors of the old format)
    out_of_bounds: int | None
    exit_code: int | None
    ranks: int  # GPUs the run used (its "# Rank" lines)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def figure_of(result: NcclTestsResult, exit_code: int | None = 0) -> NcclFigure:
    """The judged figures of a parsed run."""
    largest = result.largest
    return NcclFigure(
        avg_busbw=result.avg_busbw,
        largest_busbw=result.largest_busbw,
        largest_size=None if largest is None else largest.size,
        max_busbw=result.max_busbw,
        wrong=result.wrong,
        out_of_bounds=result.out_of_bounds,
        exit_code=exit_code,
        ranks=len(result.devices),
    )


def _value(figure: NcclFigure, floor: NcclFloor) -> float | None:
    return figure.max_busbw if floor.metric == "max" else figure.largest_busbw


def _describe(figure: NcclFigure) -> str:
    parts = []
    if figure.largest_busbw is not None:
        parts.append(f"busbw {figure.largest_busbw:g} GB/s at {figure.largest_size} B")
    if figure.avg_busbw is not None:
        parts.append(f"avg busbw {figure.avg_busbw:g} GB/s")
    return ", ".join(parts) or "no bandwidth figure"


def judge_nccl(
    figure: NcclFigure | None,
    *,
    gpu_model: str,
    gpu_count: int,
    interconnect: str,
    floors: tuple[NcclFloor, ...] = FLOORS,
    override_gbps: float | None = None,
) -> Verdict:
    """pass/fail/warn/no_floor/error for one run on ``gpu_count`` GPUs of ``gpu_model``.

    A non-zero exit code, ``#wrong`` > 0 or out-of-bounds values fail whatever the
    bandwidth; no figure is an error; no floor for (model, count, interconnect) reports the
    figure with status "no_floor" (never a pass); below an advisory floor is "warn".
    ``override_gbps`` (the inventory's own floor for this host) replaces the table's floor
    and is enforced, compared with the busbw at the largest size.
    """
    key = f"{gpu_count}x {gpu_model} over {interconnect}"
    if figure is None:
        return Verdict(CHECK, "error", f"all_reduce_perf on {key} printed no result table")
    figures: dict[str, Any] = figure.to_dict()
    if figure.exit_code:
        return Verdict(
            CHECK, "fail", f"all_reduce_perf exited {figure.exit_code} on {key}", figures
        )
    if figure.wrong > 0:
        reason = f"all_reduce_perf on {key} reported {figure.wrong} wrong result(s) (#wrong)"
        return Verdict(CHECK, "fail", reason, figures)
    if figure.out_of_bounds:
        reason = f"all_reduce_perf on {key}: {figure.out_of_bounds} out-of-bounds values"
        return Verdict(CHECK, "fail", reason, figures)
    if interconnect not in INTERCONNECT_CLASSES:
        reason = (
            f"interconnect class {interconnect!r} is not one of {', '.join(INTERCONNECT_CLASSES)}"
        )
        return Verdict(CHECK, "error", reason, figures)
    if figure.ranks and figure.ranks != gpu_count:
        reason = f"the run used {figure.ranks} GPUs, the host was judged as {gpu_count}"
        return Verdict(CHECK, "error", reason, figures)
    floor = find_floor(gpu_model, gpu_count, interconnect, floors)
    if override_gbps is not None:
        floor = NcclFloor(
            gpu_model, gpu_count, interconnect, override_gbps, "largest",
            figure.largest_size or 0, "the inventory's floor for this host",
        )  # fmt: skip
    if floor is None:
        reason = f"no floor known for {key}: {_describe(figure)} reported, not judged"
        return Verdict(CHECK, "no_floor", reason, figures)
    value = _value(figure, floor)
    figures["floor_gbps"] = floor.busbw_gbps
    figures["floor_metric"] = floor.metric
    figures["floor_enforced"] = floor.enforced
    figures["floor_measured_at"] = floor.measured_at
    if value is None:
        return Verdict(CHECK, "error", f"no busbw figure for {key}", figures, floor.source)
    measured = "max busbw" if floor.metric == "max" else f"busbw at {figure.largest_size} B"
    short = (
        f"; the floor was measured at {floor.measured_at} B, this run stopped at "
        f"{figure.largest_size} B"
        if floor.metric == "largest" and (figure.largest_size or 0) < floor.measured_at
        else ""
    )
    if value >= floor.busbw_gbps:
        reason = f"{measured} {value:g} GB/s >= floor {floor.busbw_gbps:g} GB/s for {key}"
        return Verdict(CHECK, "pass", reason + short, figures, floor.source)
    status = "fail" if floor.enforced else "warn"
    kind = "floor" if floor.enforced else "advisory floor"
    reason = f"{measured} {value:g} GB/s < {kind} {floor.busbw_gbps:g} GB/s for {key}"
    return Verdict(CHECK, status, reason + short, figures, floor.source)
