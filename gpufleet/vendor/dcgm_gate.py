"""Judge a parsed ``dcgmi diag`` run: pass, fail, error or skip, with the GPU and DCGM's words."""

from __future__ import annotations

from collections import Counter

from gpufleet.parsers.dcgm import MIG_NOTE, DcgmDiagResult, DcgmTest
from gpufleet.vendor.verdict import Verdict

CHECK = "dcgm_diag"
MAX_LISTED = 5  # failures named in the reason; all of them are in the figures


def _where(test: DcgmTest) -> str:
    return f"GPU {test.gpu}" if test.gpu is not None else "the system (no single GPU)"


def _failure(test: DcgmTest) -> str:
    text = test.message or "DCGM gave no message"
    return f"{test.name} failed on {_where(test)}: {text}"


def _figures(result: DcgmDiagResult) -> dict[str, object]:
    counts = Counter(test.status for test in result.tests)
    return {
        "format": result.format,
        "version": result.version,
        "driver": result.driver,
        "exit_code": result.exit_code,
        "counts": {status: counts.get(status, 0) for status in ("pass", "fail", "skip", "warn")},
        "failures": [
            {"test": t.name, "gpu": t.gpu, "message": t.message, "error_ids": list(t.error_ids)}
            for t in result.failures()
        ],
        "skipped": sorted({t.name for t in result.tests if t.status == "skip"}),
        "warnings": [
            {"test": t.name, "gpu": t.gpu, "message": t.message}
            for t in result.tests
            if t.status == "warn"
        ],
        # DCGM can log an error and still pass the test (https://github.com/NVIDIA/DCGM/issues/284,
        # DCGM_FR_MEMORY_ALLOC under a PASS): such results are listed, not hidden.
        "passed_with_messages": [
            {"test": t.name, "gpu": t.gpu, "message": t.message}
            for t in result.tests
            if t.status == "pass" and t.message
        ],
        "notes": list(result.notes),
    }


def judge_dcgm(
    result: DcgmDiagResult | None,
    *,
    gpu_present: bool = True,
    mig_enabled: bool = False,
    level: int | None = None,
) -> Verdict:
    """The DCGM check's verdict for one host.

    No GPU or MIG mode (which ``dcgmi diag`` does not support) is a skip with the reason,
    before any output is read. Otherwise: the parser's error is an error, any failing test a
    fail naming each GPU and DCGM's message, all tests skipped a skip (nothing was proven),
    else a pass that still lists skipped and warned tests.
    """
    at_level = f" (level {level})" if level is not None else ""
    if not gpu_present:
        return Verdict(CHECK, "skip", "no NVIDIA GPU on this host: dcgmi diag has nothing to test")
    if mig_enabled:
        return Verdict(CHECK, "skip", MIG_NOTE)
    if result is None:
        return Verdict(CHECK, "error", f"dcgmi diag{at_level} did not run or gave no output")
    figures = _figures(result)
    notes = "; ".join(result.notes)
    if result.overall == "error":
        reason = f"dcgmi diag{at_level} output cannot be trusted: {result.error}"
        return Verdict(CHECK, "error", f"{reason}; {notes}" if notes else reason, figures)
    if result.overall == "fail":
        failures = result.failures()
        listed = "; ".join(_failure(test) for test in failures[:MAX_LISTED])
        more = len(failures) - MAX_LISTED
        reason = f"dcgmi diag{at_level}: {listed}" + (f"; and {more} more" if more > 0 else "")
        return Verdict(CHECK, "fail", f"{reason} ({notes})" if notes else reason, figures)
    if result.overall == "skip":
        names = ", ".join(figures["skipped"])  # type: ignore[arg-type]
        return Verdict(
            CHECK,
            "skip",
            f"dcgmi diag{at_level} skipped every test ({names}): nothing was proven; "
            "DCGM skips tests it does not allow on this GPU or configuration",
            figures,
        )
    passed = sum(1 for test in result.tests if test.status == "pass")
    extra = []
    if figures["skipped"]:
        extra.append(f"skipped: {', '.join(figures['skipped'])}")  # type: ignore[arg-type]
    warned = figures["warnings"]
    if warned:
        extra.append(f"{len(warned)} warning(s)")  # type: ignore[arg-type]
    said = figures["passed_with_messages"]
    if said:
        extra.append(f"{len(said)} passed with a DCGM message")  # type: ignore[arg-type]
    reason = f"dcgmi diag{at_level}: {passed} results passed" + (
        f" ({'; '.join(extra)})" if extra else ""
    )
    return Verdict(CHECK, "pass", reason, figures)
