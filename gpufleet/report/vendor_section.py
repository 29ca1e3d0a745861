"""Read and check the results document's ``vendor`` section (DCGM result, nccl-tests figures).

Standard library only (the periodic run checks documents on the GPU hosts). Example::

    vendor = vendor_of(document)          # any readable schema_version
    vendor["nccl_tests"]["busbw_at_largest_gbps"] if vendor["nccl_tests"] else None

Documents of schema_version 3 carry the section; older ones are read from their checks'
figures (``vendor_diagnostics::dcgm_diag`` / ``::nccl_allreduce``), which hold fewer fields:
the result then says ``"from": "checks"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DCGM_CHECK = "vendor_diagnostics::dcgm_diag"
NCCL_CHECK = "vendor_diagnostics::nccl_allreduce"
# The gates' statuses (gpufleet.vendor.verdict.STATUSES), repeated: this module imports nothing.
VERDICTS = ("pass", "fail", "error", "skip", "warn", "no_floor")
TEST_STATUSES = ("pass", "fail", "skip", "warn")
# A check's status in a document before version 3 -> the gate's status it stood for.
_FROM_CHECK = {"pass": "pass", "fail": "fail", "error": "error", "skipped": "skip"}
_NUMBER = (int, float, type(None))


class VendorSectionError(ValueError):
    """The ``vendor`` section has the wrong shape; the message names the field."""


def _expect(where: str, value: Any, types: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise VendorSectionError(f"{where}: expected a number, got a bool")
    if not isinstance(value, types):
        raise VendorSectionError(f"{where}: unexpected {type(value).__name__}")


def _check_dcgm(dcgm: Any) -> None:
    _expect("vendor.dcgm", dcgm, dict)
    if dcgm.get("status") not in VERDICTS:
        raise VendorSectionError(f"vendor.dcgm.status: {dcgm.get('status')!r} is not a verdict")
    _expect("vendor.dcgm.level", dcgm.get("level"), (int, type(None)))
    _expect("vendor.dcgm.reason", dcgm.get("reason"), str)
    _expect("vendor.dcgm.error", dcgm.get("error"), (str, type(None)))
    tests = dcgm.get("tests")
    _expect("vendor.dcgm.tests", tests, list)
    for index, test in enumerate(tests):
        where = f"vendor.dcgm.tests[{index}]"
        _expect(where, test, dict)
        _expect(f"{where}.name", test.get("name"), str)
        _expect(f"{where}.gpu", test.get("gpu"), (str, type(None)))
        _expect(f"{where}.message", test.get("message"), str)
        if test.get("status") not in TEST_STATUSES:
            raise VendorSectionError(f"{where}.status: {test.get('status')!r} is not a test status")


def _check_nccl(nccl: Any) -> None:
    _expect("vendor.nccl_tests", nccl, dict)
    if nccl.get("status") not in VERDICTS:
        raise VendorSectionError(
            f"vendor.nccl_tests.status: {nccl.get('status')!r} is not a verdict"
        )
    for key in ("avg_busbw_gbps", "busbw_at_largest_gbps", "max_busbw_gbps", "largest_size_bytes"):
        _expect(f"vendor.nccl_tests.{key}", nccl.get(key), _NUMBER)
    _expect("vendor.nccl_tests.wrong", nccl.get("wrong"), (int, type(None)))
    sizes = nccl.get("sizes")
    _expect("vendor.nccl_tests.sizes", sizes, list)
    for index, row in enumerate(sizes):
        _expect(f"vendor.nccl_tests.sizes[{index}]", row, dict)
        _expect(f"vendor.nccl_tests.sizes[{index}].size_bytes", row.get("size_bytes"), int)
        _expect(f"vendor.nccl_tests.sizes[{index}].busbw_gbps", row.get("busbw_gbps"), _NUMBER)
    floor = nccl.get("floor")
    if floor is not None:
        _expect("vendor.nccl_tests.floor", floor, dict)
        _expect("vendor.nccl_tests.floor.busbw_gbps", floor.get("busbw_gbps"), (int, float))
        _expect("vendor.nccl_tests.floor.source", floor.get("source"), str)


def validate_vendor(section: Any) -> None:
    """Raise :class:`VendorSectionError` naming the first field of the wrong shape."""
    _expect("vendor", section, dict)
    for key in ("dcgm", "nccl_tests"):
        if key not in section:
            raise VendorSectionError(f"vendor: missing {key!r} (null when the tool did not run)")
    if section["dcgm"] is not None:
        _check_dcgm(section["dcgm"])
    if section["nccl_tests"] is not None:
        _check_nccl(section["nccl_tests"])


def _check(doc: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((c for c in doc.get("checks") or () if c.get("name") == name), None)


def _old_dcgm(check: Mapping[str, Any]) -> dict[str, Any]:
    figures = check.get("figures") or {}
    return {
        "level": None,
        "status": _FROM_CHECK.get(str(check.get("status")), "error"),
        "reason": str(check.get("message") or ""),
        "overall": None,
        "error": None,
        "format": figures.get("format"),
        "version": figures.get("version"),
        "driver": figures.get("driver"),
        "exit_code": figures.get("exit_code"),
        "tests": [],  # not recorded before schema_version 3
        "from": "checks",
    }


def _old_nccl(check: Mapping[str, Any]) -> dict[str, Any]:
    figures = check.get("figures") or {}
    floor = figures.get("floor_gbps")
    status = _FROM_CHECK.get(str(check.get("status")), "error")
    if status == "skip" and figures.get("largest_busbw") is not None:
        status = "no_floor"  # the suite skipped a measured figure that had no floor
    return {
        "status": status,
        "reason": str(check.get("message") or ""),
        "avg_busbw_gbps": figures.get("avg_busbw"),
        "busbw_at_largest_gbps": figures.get("largest_busbw"),
        "largest_size_bytes": figures.get("largest_size"),
        "max_busbw_gbps": figures.get("max_busbw"),
        "wrong": figures.get("wrong"),
        "out_of_bounds": figures.get("out_of_bounds"),
        "exit_code": figures.get("exit_code"),
        "sizes": [],  # not recorded before schema_version 3
        "floor": None
        if floor is None
        else {"busbw_gbps": floor, "metric": figures.get("floor_metric"), "source": ""},
        "from": "checks",
    }


def vendor_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document's vendor section, ``{"dcgm": ... or None, "nccl_tests": ... or None}``.

    Version 3 documents hold it; older ones are read from the vendor checks' figures (where
    a check was skipped without figures, its half is still filled in, saying why).
    """
    section = doc.get("vendor")
    if isinstance(section, Mapping):
        return {"dcgm": section.get("dcgm"), "nccl_tests": section.get("nccl_tests")}
    dcgm, nccl = _check(doc, DCGM_CHECK), _check(doc, NCCL_CHECK)
    return {
        "dcgm": None if dcgm is None else _old_dcgm(dcgm),
        "nccl_tests": None if nccl is None else _old_nccl(nccl),
    }


def nccl_busbw(doc: Mapping[str, Any]) -> float | None:
    """The nccl-tests busbw (GB/s) at the largest message size this document measured, or
    None where nccl-tests did not run or printed no table."""
    nccl = vendor_of(doc)["nccl_tests"]
    value = None if nccl is None else nccl.get("busbw_at_largest_gbps")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def latest_vendor(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """For a host's runs (oldest first): the newest DCGM result and the newest nccl-tests
    figures, each with the ``run_id`` and ``tier`` it came from (quick runs carry no
    nccl-tests figure, so the report keeps the last full run's)."""
    found: dict[str, Any] = {"dcgm": None, "nccl_tests": None}
    for doc in reversed(runs):
        section = vendor_of(doc)
        for key in found:
            if found[key] is None and section[key] is not None:
                found[key] = {**section[key], "run_id": doc.get("run_id"), "tier": doc.get("tier")}
    return found


def summary_properties(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The vendor section as ``(name, value)`` pairs for the JUnit ``<properties>``."""
    section = vendor_of(doc)
    pairs: list[tuple[str, str]] = []
    dcgm = section["dcgm"]
    if dcgm is not None:
        pairs.append(("gpufleet_dcgm_status", str(dcgm.get("status"))))
        if dcgm.get("level") is not None:
            pairs.append(("gpufleet_dcgm_level", str(dcgm["level"])))
        failed = [t for t in dcgm.get("tests") or () if t.get("status") == "fail"]
        pairs.append(("gpufleet_dcgm_failed_tests", str(len(failed))))
    nccl = section["nccl_tests"]
    if nccl is not None:
        pairs.append(("gpufleet_nccl_status", str(nccl.get("status"))))
        for key in ("busbw_at_largest_gbps", "avg_busbw_gbps", "largest_size_bytes", "wrong"):
            if nccl.get(key) is not None:
                pairs.append((f"gpufleet_nccl_{key}", str(nccl[key])))
        floor = nccl.get("floor")
        if isinstance(floor, Mapping):
            pairs.append(("gpufleet_nccl_floor_gbps", str(floor.get("busbw_gbps"))))
            pairs.append(("gpufleet_nccl_floor_source", str(floor.get("source") or "")))
    return pairs
