"""Parse the result table of nccl-tests (``all_reduce_perf`` and its siblings)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any


class NcclTestsParseError(ValueError):
    """The text holds no nccl-tests result table."""


_AVG_BUSBW_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>[-+0-9.eE]+)")
_OUT_OF_BOUNDS_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)")
# "#  Rank  0 Group  0 Pid   6899 on host device  0 [0000:04:00] NVIDIA H100 80GB HBM3"
# (newer) and "#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB" (older).
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$"
)

# The launcher prefixes gpufleet strips, one style per text (the style of the first line
# that carries nccl-tests' own "#" output). The label (rank) is kept so that table lines
# are only read from the rank that printed the table header.
#   openmpi: `mpirun --tag-output`       "[1,0]<stdout>:"   (job,rank and the stream)
#   slurm:   `srun --label`              " 0: "             (task id, right-aligned)
#   mpich:   `mpiexec -prepend-rank`     "[0] "             (MPICH and Intel MPI)
LAUNCHER_PREFIXES: dict[str, re.Pattern[str]] = {
    "openmpi": re.compile(r"^\[(?P<label>\d+,\d+)\]<std(?:out|err)>:"),
    "slurm": re.compile(r"^\s*(?P<label>\d+): ?"),
    "mpich": re.compile(r"^\[(?P<label>\d+)\] "),
}


@dataclass(frozen=True)
class NcclResultRow:
    """One message size: out-of-place timing, and in-place timing where printed.

    ``wrong`` is the ``#wrong`` count; nccl-tests before ~2020 printed the largest relative
    error instead (the "error" column): then ``wrong`` is None and ``max_error`` holds it,
    with ``error_exceeded`` set where nccl-tests starred it as over its threshold.
    """

    size: int  # bytes
    count: int  # elements
    type: str  # "float"
    redop: str  # "sum", "none"
    root: int | None  # -1 for rootless collectives; None in output without the column
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int | None  # None where nccl-tests printed N/A (validation off) or an error value
    in_place_time_us: float | None = None
    in_place_algbw: float | None = None
    in_place_busbw: float | None = None
    in_place_wrong: int | None = None
    max_error: float | None = None
    in_place_max_error: float | None = None
    error_exceeded: bool = False

    @property
    def best_busbw(self) -> float:
        """The better of the out-of-place and in-place bus bandwidth, GB/s."""
        if self.in_place_busbw is None:
            return self.busbw
        return max(self.busbw, self.in_place_busbw)


@dataclass(frozen=True)
class NcclTestsResult:
    """A whole nccl-tests run: rows, the summary lines and the devices it used."""

    rows: list[NcclResultRow]
    avg_busbw: float | None  # "# Avg bus bandwidth : 215.3", GB/s
    wrong: int  # wrong results over all rows and placements (+ starred errors); N/A counts 0
    devices: list[str] = field(default_factory=list)  # one GPU name per rank
    nccl_warnings: list[str] = field(default_factory=list)  # interleaved "NCCL WARN" lines
    out_of_bounds: int | None = None  # "# Out of bounds values : 0 OK"; None when not printed
    launcher_prefix: str | None = None  # "openmpi", "slurm", "mpich" or None (none stripped)

    @property
    def max_busbw(self) -> float | None:
        """The best bus bandwidth over all sizes and placements, GB/s."""
        values = [row.best_busbw for row in self.rows]
        return max(values) if values else None

    @property
    def largest(self) -> NcclResultRow | None:
        """The row of the largest message size (the last one when sizes repeat)."""
        if not self.rows:
            return None
        top = max(row.size for row in self.rows)
        return [row for row in self.rows if row.size == top][-1]

    @property
    def largest_busbw(self) -> float | None:
        """Bus bandwidth at the largest message size, the better placement, GB/s."""
        row = self.largest
        return None if row is None else row.best_busbw

    def to_dict(self) -> dict[str, Any]:
        result = dataclasses.asdict(self)
        result["max_busbw"] = self.max_busbw
        result["largest_busbw"] = self.largest_busbw
        result["largest_size"] = None if self.largest is None else self.largest.size
        return result


@dataclass(frozen=True)
class _Columns:
    """What the table header said: a root column, and "error" instead of "#wrong"."""

    root: bool | None = None
    error: bool = False


def _wrong(value: str) -> int | None:
    return None if value == "N/A" else int(value)


def _error(value: str) -> tuple[float | None, bool]:
    """An old-format error cell ("2e-07", "3e-02*", "N/A") -> (value, over threshold)."""
    if value == "N/A":
        return None, False
    starred = value.endswith("*")
    return float(value.rstrip("*")), starred


def _timings(cells: list[str], error_column: bool) -> tuple[float, float, float, Any, Any]:
    time_us, algbw, busbw, last = cells
    if error_column:
        value, starred = _error(last)
        return float(time_us), float(algbw), float(busbw), value, starred
    return float(time_us), float(algbw), float(busbw), _wrong(last), False


def _parse_row(tokens: list[str], columns: _Columns) -> NcclResultRow | None:
    """A result row, or None when the line is something else (NCCL INFO, launcher noise)."""
    if len(tokens) < 8 or not (tokens[0].isdecimal() and tokens[1].isdecimal()):
        return None
    # size count type redop [root] then 4 cells out-of-place and (usually) 4 in-place.
    has_root = columns.root if columns.root is not None else len(tokens) in (9, 13)
    head = 5 if has_root else 4
    timings = tokens[head:]
    if len(timings) not in (4, 8):
        return None
    try:
        size, count = int(tokens[0]), int(tokens[1])
        out = _timings(timings[:4], columns.error)
        inp = _timings(timings[4:], columns.error) if len(timings) == 8 else None
        root = int(tokens[4]) if has_root else None
    except ValueError:
        return None
    return NcclResultRow(
        size=size,
        count=count,
        type=tokens[2],
        redop=tokens[3],
        root=root,
        time_us=out[0],
        algbw=out[1],
        busbw=out[2],
        wrong=None if columns.error else out[3],
        in_place_time_us=None if inp is None else inp[0],
        in_place_algbw=None if inp is None else inp[1],
        in_place_busbw=None if inp is None else inp[2],
        in_place_wrong=None if inp is None or columns.error else inp[3],
        max_error=out[3] if columns.error else None,
        in_place_max_error=inp[3] if inp is not None and columns.error else None,
        error_exceeded=bool(out[4] or (inp is not None and inp[4])),
    )


def detect_launcher_prefix(lines: list[str]) -> str | None:
    """The launcher prefix style of the first line whose remainder is nccl-tests' own
    ``#`` output, or None when nccl-tests' lines carry no prefix.

    >>> detect_launcher_prefix(["[1,0]<stdout>:# nThread 1 nGpus 1"])
    'openmpi'
    >>> detect_launcher_prefix([" 0: #  Rank  0 Group  0 Pid 2", "# Avg bus bandwidth : 1"])
    'slurm'
    """
    for line in lines:
        if line.lstrip().startswith("#"):
            return None
        for style, pattern in LAUNCHER_PREFIXES.items():
            match = pattern.match(line)
            if match and line[match.end() :].lstrip().startswith("#"):
                return style
    return None


def _split_prefix(line: str, style: str | None) -> tuple[str | None, str]:
    """(launcher label, the line without the prefix); label None where there is none."""
    if style is not None:
        match = LAUNCHER_PREFIXES[style].match(line)
        if match:
            return match["label"], line[match.end() :]
    return None, line


def _header_columns(words: list[str]) -> _Columns | None:
    """The column layout of a "# size count type redop [root] time ... #wrong|error" line."""
    if words[:2] != ["size", "count"]:
        return None
    return _Columns(root="root" in words, error="error" in words and "#wrong" not in words)


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Rows, average bus bandwidth and wrong-result total of an nccl-tests run.

    Works with both header generations (with and without the ``root`` column, the old
    "error" column or "#wrong"), skips interleaved NCCL INFO/WARN and launcher lines, and
    strips one launcher prefix style (``LAUNCHER_PREFIXES``) consistently; table rows are
    only taken from the rank that printed the table header.

    >>> result = parse_nccl_tests(
    ...     "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\\n"
    ...     "   8   2  float  sum  -1  35.2  0.00  0.00  0  34.1  0.00  0.00  0\\n"
    ...     "# Avg bus bandwidth    : 0.0001\\n")
    >>> result.rows[0].size, result.rows[0].root, result.avg_busbw, result.wrong
    (8, -1, 0.0001, 0)
    """
    lines = text.splitlines()
    style = detect_launcher_prefix(lines)
    rows: list[NcclResultRow] = []
    devices: list[str] = []
    warnings: list[str] = []
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    columns = _Columns()
    table_label: str | None = None  # the launcher label of the rank that printed the header
    for raw in lines:
        label, line = _split_prefix(raw, style)
        stripped = line.strip()
        if "NCCL WARN" in stripped:
            warnings.append(stripped)
            continue
        if table_label is not None and label != table_label:
            continue  # another rank's chatter, or a line the launcher did not label
        if stripped.startswith("#"):
            average = _AVG_BUSBW_RE.match(stripped)
            if average:
                avg_busbw = float(average["value"])
            bounds = _OUT_OF_BOUNDS_RE.match(stripped)
            if bounds:
                out_of_bounds = int(bounds["count"])
            device = _DEVICE_RE.match(stripped)
            if device:
                devices.append(device["name"])
            header = _header_columns(stripped.lstrip("#").split())
            if header is not None:
                columns = header
                if style is not None:
                    table_label = label
            continue
        row = _parse_row(stripped.split(), columns)
        if row is not None:
            rows.append(row)

    if not rows and avg_busbw is None:
        raise NcclTestsParseError(
            "no nccl-tests result rows and no '# Avg bus bandwidth' line found; pass the "
            "complete stdout of all_reduce_perf (if it stopped with an error, run "
            "`gpufleet diagnose` on it)"
        )
    wrong = sum(
        (row.wrong or 0) + (row.in_place_wrong or 0) + int(row.error_exceeded)
        for row in rows  # N/A (validation off) counts as 0
    )
    return NcclTestsResult(
        rows=rows,
        avg_busbw=avg_busbw,
        wrong=wrong,
        devices=devices,
        nccl_warnings=warnings,
        out_of_bounds=out_of_bounds,
        launcher_prefix=style,
    )


def rank_hosts(text: str) -> list[tuple[int, str]]:
    """(rank, host) of every ``# Rank`` line, whichever launcher prefix carries it: a run across
    hosts names several hosts, and a rank number printed twice means processes that each ran
    alone (nccl-tests built without MPI under mpirun).

    >>> rank_hosts("[1,0]<stdout>:#  Rank  0 Group  0 Pid 21 on a device  0 [0x35] Tesla T4")
    [(0, 'a')]
    """
    lines = text.splitlines()
    style = detect_launcher_prefix(lines)
    found = []
    for raw in lines:
        match = _DEVICE_RE.match(_split_prefix(raw, style)[1].strip())
        if match:
            found.append((int(match["rank"]), match["host"]))
    return found
