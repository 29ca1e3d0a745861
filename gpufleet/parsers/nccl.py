"""Parse the result table of nccl-tests (``all_reduce_perf`` and its siblings)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any


class NcclTestsParseError(ValueError):
    """The text holds no nccl-tests result table."""


_AVG_BUSBW_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>[-+0-9.eE]+)")
# "#  Rank  0 Group  0 Pid   6899 on host device  0 [0000:04:00] NVIDIA H100 80GB HBM3"
# (newer) and "#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB" (older).
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$"
)


@dataclass(frozen=True)
class NcclResultRow:
    """One message size: out-of-place timing, and in-place timing where printed."""

    size: int  # bytes
    count: int  # elements
    type: str  # "float"
    redop: str  # "sum", "none"
    root: int | None  # -1 for rootless collectives; None in output without the column
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int | None  # None where nccl-tests printed N/A (validation off)
    in_place_time_us: float | None = None
    in_place_algbw: float | None = None
    in_place_busbw: float | None = None
    in_place_wrong: int | None = None


@dataclass(frozen=True)
class NcclTestsResult:
    """A whole nccl-tests run: rows, the summary lines and the devices it used."""

    rows: list[NcclResultRow]
    avg_busbw: float | None  # "# Avg bus bandwidth : 215.3", GB/s
    wrong: int  # total wrong results over all rows and both placements; N/A counts as 0
    devices: list[str] = field(default_factory=list)  # one GPU name per rank
    nccl_warnings: list[str] = field(default_factory=list)  # interleaved "NCCL WARN" lines

    @property
    def max_busbw(self) -> float | None:
        """The best bus bandwidth over all sizes and placements, GB/s."""
        values = [row.busbw for row in self.rows] + [
            row.in_place_busbw for row in self.rows if row.in_place_busbw is not None
        ]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        result = dataclasses.asdict(self)
        result["max_busbw"] = self.max_busbw
        return result


def _wrong(value: str) -> int | None:
    return None if value == "N/A" else int(value)


def _timings(cells: list[str]) -> tuple[float, float, float, int | None]:
    time_us, algbw, busbw, wrong = cells
    return float(time_us), float(algbw), float(busbw), _wrong(wrong)


def _parse_row(tokens: list[str], has_root: bool | None) -> NcclResultRow | None:
    """A result row, or None when the line is something else (NCCL INFO, mpirun noise)."""
    if len(tokens) < 8 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    # size count type redop [root] then 4 cells out-of-place and (usually) 4 in-place.
    if has_root is None:
        has_root = len(tokens) in (9, 13)
    head = 5 if has_root else 4
    timings = tokens[head:]
    if len(timings) not in (4, 8):
        return None
    try:
        out_of_place = _timings(timings[:4])
        in_place = _timings(timings[4:]) if len(timings) == 8 else (None, None, None, None)
        root = int(tokens[4]) if has_root else None
    except ValueError:
        return None
    return NcclResultRow(
        size=int(tokens[0]),
        count=int(tokens[1]),
        type=tokens[2],
        redop=tokens[3],
        root=root,
        time_us=out_of_place[0],
        algbw=out_of_place[1],
        busbw=out_of_place[2],
        wrong=out_of_place[3],
        in_place_time_us=in_place[0],
        in_place_algbw=in_place[1],
        in_place_busbw=in_place[2],
        in_place_wrong=in_place[3],
    )


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Rows, average bus bandwidth and wrong-result total of an nccl-tests run.

    Works with both header generations (with and without the ``root`` column, "error" or
    "#wrong") and skips interleaved NCCL INFO/WARN and launcher lines.

    >>> result = parse_nccl_tests(
    ...     "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\\n"
    ...     "   8   2  float  sum  -1  35.2  0.00  0.00  0  34.1  0.00  0.00  0\\n"
    ...     "# Avg bus bandwidth    : 0.0001\\n")
    >>> result.rows[0].size, result.rows[0].root, result.avg_busbw, result.wrong
    (8, -1, 0.0001, 0)
    """
    rows: list[NcclResultRow] = []
    devices: list[str] = []
    warnings: list[str] = []
    avg_busbw: float | None = None
    has_root: bool | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            average = _AVG_BUSBW_RE.match(stripped)
            if average:
                avg_busbw = float(average["value"])
            device = _DEVICE_RE.match(stripped)
            if device:
                devices.append(device["name"])
            words = stripped.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                has_root = "root" in words
            continue
        if "NCCL WARN" in stripped:
            warnings.append(stripped)
            continue
        row = _parse_row(stripped.split(), has_root)
        if row is not None:
            rows.append(row)

    if not rows and avg_busbw is None:
        raise NcclTestsParseError(
            "no nccl-tests result rows and no '# Avg bus bandwidth' line found; pass the "
            "complete stdout of all_reduce_perf (if it stopped with an error, run "
            "`gpufleet diagnose` on it)"
        )
    wrong = sum(
        (row.wrong or 0) + (row.in_place_wrong or 0)  # N/A (validation off) counts as 0
        for row in rows
    )
    return NcclTestsResult(
        rows=rows, avg_busbw=avg_busbw, wrong=wrong, devices=devices, nccl_warnings=warnings
    )
