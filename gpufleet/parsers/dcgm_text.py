"""Read the plain-text table that ``dcgmi diag`` prints without ``-j`` (DCGM 3.x and 4.x)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CATEGORY_RE = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w /]*?)\s+-+\+")
_BORDER_RE = re.compile(r"^[+|][-=+|\s]*$")
# 3.x: "Pass - GPU: 1", "Fail - All", "Skip"; 4.x: "Pass", then "GPU0: Pass" lines.
_STATUS_RE = re.compile(
    r"^(?P<word>Pass|Fail|Skip|Warn|Not Run)(?:\s+-\s+(?:GPU:\s*(?P<gpu>\d+)|All))?$", re.I
)
_GPU_LINE_RE = re.compile(r"^GPU(?P<gpu>\d+):\s*(?P<word>Pass|Fail|Skip|Warn|Not Run)$", re.I)
_MESSAGE_GPU_RE = re.compile(r"^GPU\s*(?P<gpu>\d+)\b")
_WORDS = {"pass": "pass", "fail": "fail", "skip": "skip", "warn": "warn", "not run": "skip"}
_METADATA = {"DCGM Version": "version", "Driver Version Detected": "driver"}


@dataclass(frozen=True)
class TextEntry:
    """One test result on one GPU (``gpu`` None: all GPUs or the system)."""

    name: str
    gpu: str | None
    status: str
    message: str
    category: str


@dataclass
class TextTable:
    """What the table held: entries, metadata and ``Error:`` lines printed around it."""

    entries: list[TextEntry] = field(default_factory=list)
    version: str | None = None
    driver: str | None = None
    errors: list[str] = field(default_factory=list)
    recognised: bool = False


@dataclass
class _Test:
    name: str
    category: str
    status: str | None  # the row's own status ("Fail" of a 4.x parent row)
    results: list[tuple[str | None, str]] = field(default_factory=list)  # (gpu, status)
    warnings: list[list[str]] = field(default_factory=list)  # wrapped chunks per message
    infos: list[list[str]] = field(default_factory=list)


def _cells(line: str) -> tuple[str, str] | None:
    """(name cell, raw value cell) of a ``| name | value |`` row."""
    parts = line.rstrip().split("|")
    if len(parts) != 4 or parts[0] or parts[3]:
        return None
    return parts[1].strip(), parts[2]


def _chunk(raw: str) -> str:
    """The text of one wrapped value cell: dcgmi cuts long text every (width - 3) characters,
    mid-word, so chunks are joined as they are and whitespace is collapsed afterwards."""
    return raw[1 : max(len(raw) - 2, 1)]


def _join(chunks: list[str]) -> str:
    return re.sub(r"\s+", " ", "".join(chunks)).strip()


def _status(value: str) -> tuple[str, str | None] | None:
    match = _STATUS_RE.match(value.strip())
    if not match:
        return None
    return _WORDS[match["word"].lower()], match["gpu"]


def _entries(test: _Test) -> list[TextEntry]:
    results = list(test.results)
    if test.status == "fail" and not any(status == "fail" for _, status in results):
        results.append((None, "fail"))  # 4.x: the test failed as a whole, its GPUs passed
    if not results and test.status is not None:
        results.append((None, test.status))
    messages = [_join(chunks) for chunks in test.warnings]
    infos = [_join(chunks) for chunks in test.infos]
    entries = []
    for gpu, status in results:
        own = [m for m in messages if _owner(m) == gpu] if gpu is not None else []
        if not own and status in ("fail", "warn"):
            own = [m for m in messages if _owner(m) is None or gpu is None]
        if not own and status == "skip":
            own = infos
        entries.append(TextEntry(test.name, gpu, status, "; ".join(own), test.category))
    return entries


def _owner(message: str) -> str | None:
    match = _MESSAGE_GPU_RE.match(message)
    return match["gpu"] if match else None


def parse_text_table(text: str) -> TextTable:
    """Entries of a ``dcgmi diag`` text table; ``recognised`` False when there is none.

    >>> table = parse_text_table(
    ...     "|-----  Deployment  --------+------|\\n| Denylist | Pass |\\n")
    >>> [(e.name, e.gpu, e.status) for e in table.entries]
    [('Denylist', None, 'pass')]
    """
    table = TextTable()
    category = ""
    tests: list[_Test] = []
    block: list[str] | None = None  # the Warning/Info message being continued
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith(("|", "+")):
            if stripped.startswith("Error:"):
                table.errors.append(stripped)
            continue
        heading = _CATEGORY_RE.match(stripped)
        if heading:
            category, block = heading["name"].strip(), None
            table.recognised = True
            continue
        if _BORDER_RE.match(stripped):
            continue
        cells = _cells(stripped)
        if cells is None:
            continue
        name, raw = cells
        value = raw.strip()
        if not category:
            table.recognised = table.recognised or (name, value) == ("Diagnostic", "Result")
            continue
        if category == "Metadata":
            if name in _METADATA:
                setattr(table, _METADATA[name], value)
            continue
        if name in ("Warning", "Info"):
            if tests:
                block = [_chunk(raw)]
                (tests[-1].warnings if name == "Warning" else tests[-1].infos).append(block)
            continue
        if name:
            parsed = _status(value)
            test = _Test(name, category, None if parsed is None else parsed[0])
            if parsed is None:
                test.status = "fail"
                test.warnings.append(
                    [f" dcgmi diag printed {value!r}, not a status gpufleet knows "]
                )
            elif parsed[1] is not None or "all" in value.lower():
                test.results.append((parsed[1], parsed[0]))
            tests.append(test)
            block = None
            continue
        if not tests:
            continue
        gpu_line = _GPU_LINE_RE.match(value)
        more = _status(value)
        if gpu_line:
            tests[-1].results.append((gpu_line["gpu"], _WORDS[gpu_line["word"].lower()]))
            block = None
        elif more is not None and more[1] is not None and block is None:
            tests[-1].results.append((more[1], more[0]))
        elif block is not None:
            block.append(_chunk(raw))
    for test in tests:
        table.entries.extend(_entries(test))
    return table
