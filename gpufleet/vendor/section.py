"""The results document's ``vendor`` section: DCGM's result and the nccl-tests figures of one run.

Both halves are plain JSON built from a gate's verdict and the parsed output, so that every
report (terminal, JUnit, HTML, Prometheus) and the workloads' all-reduce check read the same
figures. Their shape is checked by gpufleet.report.vendor_section.
"""

from __future__ import annotations

from typing import Any

from gpufleet.parsers.dcgm import DcgmDiagResult
from gpufleet.parsers.nccl import NcclTestsResult
from gpufleet.vendor.nccl_gate import NcclFigure
from gpufleet.vendor.verdict import Verdict


def empty_section() -> dict[str, Any]:
    """The section of a run that ran neither tool: ``{"dcgm": None, "nccl_tests": None}``."""
    return {"dcgm": None, "nccl_tests": None}


def dcgm_section(
    verdict: Verdict, *, level: int | None, result: DcgmDiagResult | None
) -> dict[str, Any]:
    """DCGM's part: the gate's status and reason, and (where dcgmi ran) the parser's
    ``overall``, ``error`` and every test as name / gpu / status / message.

    ``result`` is None when dcgmi did not run (no GPU, MIG, dcgm off): ``overall`` is then None.
    """
    return {
        "level": level,
        "status": verdict.status,
        "reason": verdict.reason,
        "overall": None if result is None else result.overall,
        "error": None if result is None else result.error,
        "format": None if result is None else result.format,
        "version": None if result is None else result.version,
        "driver": None if result is None else result.driver,
        "exit_code": None if result is None else result.exit_code,
        "tests": []
        if result is None
        else [
            {"name": t.name, "gpu": t.gpu, "status": t.status, "message": t.message}
            for t in result.tests
        ],
    }


def _floor(verdict: Verdict) -> dict[str, Any] | None:
    figures = verdict.figures
    if figures.get("floor_gbps") is None:
        return None
    return {
        "busbw_gbps": figures["floor_gbps"],
        "metric": figures.get("floor_metric"),
        "enforced": figures.get("floor_enforced", True),
        "measured_at_bytes": figures.get("floor_measured_at"),
        "source": verdict.source,
    }


def nccl_section(
    verdict: Verdict,
    *,
    parsed: NcclTestsResult | None,
    figure: NcclFigure | None,
    gpu_model: str,
    gpu_count: int,
    interconnect: str,
) -> dict[str, Any]:
    """nccl-tests' part: the figures gpufleet judges (GB/s), one row per message size, the
    floor with its source (None when no floor is known) and the gate's verdict."""
    rows = [] if parsed is None else parsed.rows
    return {
        "status": verdict.status,
        "reason": verdict.reason,
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "interconnect": interconnect,
        "avg_busbw_gbps": None if figure is None else figure.avg_busbw,
        "busbw_at_largest_gbps": None if figure is None else figure.largest_busbw,
        "largest_size_bytes": None if figure is None else figure.largest_size,
        "max_busbw_gbps": None if figure is None else figure.max_busbw,
        "wrong": None if figure is None else figure.wrong,
        "out_of_bounds": None if figure is None else figure.out_of_bounds,
        "exit_code": None if figure is None else figure.exit_code,
        "sizes": [
            {
                "size_bytes": row.size,
                "busbw_gbps": row.best_busbw,
                "algbw_gbps": row.algbw,
                "time_us": row.time_us,
                "wrong": row.wrong,
            }
            for row in rows
        ],
        "floor": _floor(verdict),
    }
