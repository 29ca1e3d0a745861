"""Parse ``dcgmi diag`` output: DCGM 3.x JSON, DCGM 4.x JSON and the plain-text table."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpufleet.parsers.dcgm_errors import dcgm_lines, relay, with_fix
from gpufleet.parsers.dcgm_text import TextTable, parse_text_table

ROOT_KEYS = {"DCGM GPU Diagnostic": "3", "DCGM Diagnostic": "4"}
STATUSES = ("pass", "fail", "skip", "warn")
# dcgmi exits with DCGM's negative status code as an unsigned byte (256 + code).
# 226 = -30 = DCGM_ST_NVVS_ERROR, "some unexpected error in nvvs" (DCGM maintainer,
# https://github.com/NVIDIA/DCGM/issues/158).
EXIT_CODES = {226: "DCGM_ST_NVVS_ERROR: the diagnostic backend (nvvs) failed"}
MIG_NOTE = (
    "dcgmi diag does not support GPUs in MIG mode "
    "(https://github.com/aws/aws-parallelcluster-cookbook/issues/3183): "
    "disable MIG on the host (nvidia-smi -mig 0) to run the DCGM diagnostic"
)
_STATUS_WORDS = {
    "pass": "pass",
    "fail": "fail",
    "skip": "skip",
    "skipped": "skip",
    "not run": "skip",
    "warn": "warn",
    "warning": "warn",
}
DCGM_SAID = "dcgmi diag could not run; DCGM said: "
_MIG_RE = re.compile(r"\bMIG\b")
_GPU_WORD_RE = re.compile(r"\bGPU\s*(\d+)\b")


@dataclass(frozen=True)
class DcgmTest:
    """One test's result on one GPU (``gpu`` None: the test judged the whole system).

    ``status`` is pass | fail | skip | warn; ``message`` is DCGM's warning text (or, for a
    skip, its info text); ``error_ids`` are 4.x's DCGM_FR_* numbers where DCGM gave them.
    """

    name: str
    gpu: str | None
    status: str
    message: str = ""
    category: str = ""
    error_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class DcgmDiagResult:
    """A ``dcgmi diag`` run as gpufleet reads it.

    ``format``: "3", "4" or "text" ("" when nothing was recognised). ``overall``: pass |
    fail | error | skip, where error means the output cannot be trusted (DCGM's own error,
    a runtime error, no tests, an unrecognised document, or a non-zero exit without a
    failing test); ``error`` is the reason then, with DCGM's words and the fix where
    known, else None.
    """

    format: str
    tests: list[DcgmTest]
    overall: str
    error: str | None
    version: str | None = None
    driver: str | None = None
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)

    def failures(self) -> list[DcgmTest]:
        """The failing results, in document order."""
        return [test for test in self.tests if test.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def status_word(raw: Any) -> str | None:
    """DCGM's status word ("PASS", "Skip", "Fail - GPU: 0") -> pass|fail|skip|warn, or None.

    >>> status_word("PASS"), status_word("Fail - All"), status_word("Not Run")
    ('pass', 'fail', 'skip')
    """
    if not isinstance(raw, str):
        return None
    word = raw.split(" - ", 1)[0].strip().lower()
    return _STATUS_WORDS.get(word)


def exit_reason(exit_code: int) -> str:
    """A sentence for a non-zero ``dcgmi diag`` exit status."""
    known = EXIT_CODES.get(exit_code)
    if known:
        return f"dcgmi diag exited {exit_code} ({known})"
    if exit_code > 128:
        return f"dcgmi diag exited {exit_code} (DCGM status {exit_code - 256})"
    return f"dcgmi diag exited {exit_code}"


def _texts(value: Any) -> list[str]:
    """Warning/info entries as text: strings, {"warning": ...} objects, or lists of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        text = value.get("warning") or value.get("message") or value.get("info")
        return _texts(text)
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return [str(value)]


def _list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else empty (a malformed document never raises)."""
    return value if isinstance(value, list) else []


def _error_ids(warnings: Any) -> tuple[int, ...]:
    if not isinstance(warnings, list):
        return ()
    return tuple(
        item["error_id"]
        for item in warnings
        if isinstance(item, dict) and isinstance(item.get("error_id"), int)
    )


def _gpus(result: dict[str, Any]) -> list[str | None]:
    """The GPU ids one result applies to: 3.x ``gpu_id``/``gpu_ids`` ("0,1,2" or 0), 4.x
    ``entity_id`` (GPU entities; other entity groups keep their id with the group name)."""
    for key in ("gpu_id", "gpu_ids"):
        if key in result and result[key] is not None:
            ids = [part.strip() for part in str(result[key]).split(",") if part.strip()]
            return list(ids) or [None]
    if result.get("entity_id") is not None:
        group = str(result.get("entity_group") or "GPU")
        entity = str(result["entity_id"])
        return [entity if group.upper() == "GPU" else f"{group}:{entity}"]
    return [None]


def _result_tests(name: str, category: str, result: dict[str, Any]) -> Iterator[DcgmTest]:
    raw = result.get("status")
    status = status_word(raw)
    warnings = _texts(result.get("warnings"))
    message = "; ".join(warnings)
    if status is None:
        # A word gpufleet does not know is never read as a pass.
        status = "fail"
        unknown = f"DCGM reported status {raw!r}, which gpufleet does not know"
        message = "; ".join([unknown, *warnings])
    elif status == "skip" and not message:
        message = "; ".join(_texts(result.get("info")))
    ids = _error_ids(result.get("warnings"))
    gpus = _gpus(result)
    for gpu in gpus:
        own = message
        if len(gpus) > 1 and any(_GPU_WORD_RE.search(w) for w in warnings):
            # One result for several GPUs (3.x "gpu_ids": "0,1,2,3"): each GPU keeps the
            # warnings that name it, and those that name no GPU.
            mine = [
                w for w in warnings if gpu in _GPU_WORD_RE.findall(w) or not _GPU_WORD_RE.search(w)
            ]
            own = "; ".join(mine) or message
        yield DcgmTest(name, gpu, status, own, category, ids)


def _json_tests(root: dict[str, Any]) -> list[DcgmTest]:
    tests: list[DcgmTest] = []
    for category in _list(root.get("test_categories")):
        if not isinstance(category, dict):
            continue
        category_name = str(category.get("category") or "")
        for test in _list(category.get("tests")):
            if not isinstance(test, dict):
                continue  # NVVS writes `null` between tests
            name = str(test.get("name") or "unnamed test")
            results = [r for r in _list(test.get("results")) if isinstance(r, dict)]
            found = [t for r in results for t in _result_tests(name, category_name, r)]
            summary = test.get("test_summary")
            summary = summary if isinstance(summary, dict) else {}
            summary_status = status_word(summary.get("status"))
            if summary_status == "fail" and not any(t.status == "fail" for t in found):
                # 4.x: the test failed as a whole (a system-level error) with passing GPUs.
                said = _texts(summary.get("warnings")) + _texts(summary.get("info"))
                found.append(DcgmTest(name, None, "fail", "; ".join(said), category_name))
            elif not found and summary_status is not None:
                found.append(DcgmTest(name, None, summary_status, "", category_name))
            tests.extend(found)
    return tests


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (dcgmi and nvvs may print lines before it)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except RecursionError:
            return None  # nested deeper than any dcgmi document; not worth rescanning
        except ValueError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


def _runtime_error(document: dict[str, Any], root: Any) -> str | None:
    for holder in (document, root):
        if isinstance(holder, dict):
            texts = _texts(holder.get("runtime_error"))
            if texts:
                return "; ".join(texts)
    return None


def _from_json(document: dict[str, Any]) -> DcgmDiagResult | None:
    fmt = next((ROOT_KEYS[key] for key in ROOT_KEYS if key in document), None)
    if fmt is None:
        return None
    root = document[next(key for key in ROOT_KEYS if key in document)]
    found = document.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    version = (root.get("version") if isinstance(root, dict) else None) or metadata.get("version")
    driver = metadata.get("Driver Version Detected") or (
        root.get("Driver Version Detected") if isinstance(root, dict) else None
    )
    tests = _json_tests(root) if isinstance(root, dict) else []
    error = _runtime_error(document, root)
    if not isinstance(root, dict) and error is None:
        key = next(key for key in ROOT_KEYS if key in document)
        kind = "a list" if isinstance(root, list) else type(root).__name__
        return DcgmDiagResult(
            fmt, [], "", f"{key!r} holds {kind}, not an object with test_categories; "
            "not dcgmi diag -j output as DCGM writes it",
        )  # fmt: skip
    return DcgmDiagResult(
        fmt, tests, "", with_fix(f"DCGM runtime error: {error}") if error else None,
        None if version is None else str(version), None if driver is None else str(driver),
    )  # fmt: skip


def _from_text(table: TextTable) -> DcgmDiagResult:
    tests = [
        DcgmTest(entry.name, entry.gpu, entry.status, entry.message, entry.category)
        for entry in table.entries
    ]
    error = with_fix("; ".join(table.errors)) if table.errors else None
    return DcgmDiagResult("text", tests, "", error, table.version, table.driver)


def _judge(result: DcgmDiagResult, exit_code: int | None) -> DcgmDiagResult:
    """Fill in ``overall`` (and ``error``) from the tests, the document and the exit code."""
    notes = list(result.notes)
    error = result.error
    if error is None and not result.tests:
        error = (
            f"no test results found in the DCGM {result.format} output"
            if result.format != "text"
            else "no test results found in the dcgmi diag table"
        )
    failed = any(test.status == "fail" for test in result.tests)
    if exit_code:
        if failed or error:
            notes.append(exit_reason(exit_code))
        else:
            error = f"{exit_reason(exit_code)} although no test reported a failure"
    if error is not None:
        overall = "error"
    elif failed:
        overall = "fail"
    elif all(test.status == "skip" for test in result.tests):
        overall = "skip"
    else:
        overall = "pass"
    return dataclasses.replace(
        result, overall=overall, error=error, exit_code=exit_code, notes=notes
    )


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:120]


def parse_dcgm_diag(text: str | None, exit_code: int | None = None) -> DcgmDiagResult:
    """Read ``dcgmi diag`` output (``-j`` JSON of DCGM 3.x or 4.x, or the text table).

    Never raises on malformed input and never defaults to pass: an unrecognised or empty
    output, a runtime error, no tests, or a non-zero ``exit_code`` without a failing test
    gives ``overall == "error"`` with the reason in ``error``. When dcgmi diag could not run
    and said why, ``error`` quotes DCGM's lines and the fix where known (``dcgm_errors``).
    MIG: dcgmi diag refuses GPUs in MIG mode; output that mentions MIG carries ``MIG_NOTE``
    in ``notes``.

    >>> parse_dcgm_diag("").overall, parse_dcgm_diag("").error
    ('error', 'empty dcgmi diag output')

    A document shaped in a way nobody foresaw is an error result naming the exception.
    """
    try:
        return _parse(text, exit_code)
    except Exception as exc:  # the contract is "never raises"; the reason says what broke
        reason = f"gpufleet could not read this dcgmi diag output ({type(exc).__name__}: {exc})"
        return _judge(DcgmDiagResult("", [], "", reason), exit_code)


def _parse(text: str | None, exit_code: int | None) -> DcgmDiagResult:
    """The parse proper (``parse_dcgm_diag`` guards it)."""
    if not isinstance(text, str) or not text.strip():
        return _judge(DcgmDiagResult("", [], "", "empty dcgmi diag output"), exit_code)
    document = _first_json_object(text)
    result = None if document is None else _from_json(document)
    if result is None:
        table = parse_text_table(text)
        said = [] if table.recognised else dcgm_lines(text)
        if table.recognised:
            result = _from_text(table)
        elif said:
            # Error-only output: dcgmi (or nvvs) stopped before any test and said why.
            result = DcgmDiagResult("text", [], "", relay(said, lead=DCGM_SAID))
        elif document is not None:
            keys = ", ".join(sorted(map(str, document))[:5]) or "none"
            result = DcgmDiagResult(
                "", [], "", "JSON without a 'DCGM GPU Diagnostic' (DCGM 3.x) or 'DCGM "
                f"Diagnostic' (DCGM 4.x) key (top-level keys: {keys}); not dcgmi diag -j output",
            )  # fmt: skip
        else:
            result = DcgmDiagResult(
                "", [], "", "unrecognised dcgmi diag output: neither DCGM 3.x/4.x JSON nor "
                f"the dcgmi diag table (first line: {_first_line(text)!r})",
            )  # fmt: skip
    if _MIG_RE.search(text):
        result = dataclasses.replace(result, notes=[*result.notes, MIG_NOTE])
    return _judge(result, exit_code)
