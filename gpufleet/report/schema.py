"""The results JSON document: one per host per validation run (schema_version 3; 1-2 still read).

Example document (abridged)::

    {"schema_version": 3, "host": "gpu-a", "run_id": "20261130T085000Z-3f2a",
     "started_at": "2026-11-30T08:50:00+00:00", "finished_at": "...", "duration_s": 41.2,
     "tier": "quick", "target": "ssh://gpu-a", "status": "fail", "run_error": null,
     "spec": {"tf_version": "2.21.0", "driver_branch": 580, ...},
     "summary": {"pass": 9, "fail": 1, "skipped": 6, "error": 0, "inconclusive": 0},
     "checks": [{"name": "host_state::nouveau_not_loaded", "status": "pass",
                 "message": "", "figures": {}, "duration_s": 0.1}],
     "workloads": [{...one Workload JSON document per workload...}],
     "gpu_health": {"gpus": [...], "findings": [...]} or null,
     "vendor": {"dcgm": {"level": 1, "status": "pass", "overall": "pass", "tests": [...]},
                "nccl_tests": {"busbw_at_largest_gbps": 231.4, "floor": {...}, ...} or null}}

``vendor`` (version 3) is gpufleet.vendor.section's; gpufleet.report.vendor_section reads it,
and reads the vendor checks' figures of older documents into the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.report.vendor_section import VendorSectionError, validate_vendor

SCHEMA_VERSION = 3
# Version 2 added the run status "unproven"; version 1 documents (where an inconclusive check
# left the run "pass") are still read and judged by the rule they were written with.
# Version 3 added the ``vendor`` section (DCGM's result and the nccl-tests figures in one place);
# older documents have none, and their vendor checks' figures stand for it.
READABLE_VERSIONS = (1, 2, 3)
# "inconclusive": a workload's speed verdict could not be told apart from noise (never a pass).
CHECK_STATUSES = ("pass", "fail", "skipped", "error", "inconclusive")
# "error": the run itself could not complete (host unreachable, suite crashed).
# "unproven": nothing failed, but a check (a speed verdict) was inconclusive: not a pass, and
# never a baseline.
RUN_STATUSES = ("pass", "unproven", "fail", "error")
TIERS = ("quick", "full")

_TOP_LEVEL: dict[str, type | tuple[type, ...]] = {
    "schema_version": int,
    "host": str,
    "run_id": str,
    "started_at": str,
    "finished_at": (str, type(None)),
    "duration_s": (int, float, type(None)),
    "tier": str,
    "target": str,
    "status": str,
    "run_error": (str, type(None)),
    "spec": dict,
    "summary": dict,
    "checks": list,
    "workloads": list,
    "gpu_health": (dict, type(None)),
}


class ResultsSchemaError(ValueError):
    """A results document does not have the shape of its schema_version; says where."""


def summarize(checks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Count the checks per status. Example: ``{"pass": 3, "fail": 0, ...}``"""
    counts = dict.fromkeys(CHECK_STATUSES, 0)
    for check in checks:
        counts[str(check["status"])] = counts.get(str(check["status"]), 0) + 1
    return counts


def overall_status(
    checks: Sequence[Mapping[str, Any]], run_error: str | None, version: int = SCHEMA_VERSION
) -> str:
    """``error`` when the run broke, ``fail`` when any check failed or errored, ``unproven``
    when any was inconclusive (schema_version >= 2), else ``pass``."""
    if run_error:
        return "error"
    if any(c["status"] in ("fail", "error") for c in checks):
        return "fail"
    if version >= 2 and any(c["status"] == "inconclusive" for c in checks):
        return "unproven"
    return "pass"


def _check_type(where: str, value: Any, expected: type | tuple[type, ...]) -> None:
    # bool is an int subclass: a True where a number belongs is a bug, not a number.
    if isinstance(value, bool) and bool not in (
        expected if isinstance(expected, tuple) else (expected,)
    ):
        raise ResultsSchemaError(f"{where}: expected {expected}, got a bool")
    if not isinstance(value, expected):
        names = (
            " or ".join(t.__name__ for t in expected)
            if isinstance(expected, tuple)
            else expected.__name__
        )
        raise ResultsSchemaError(f"{where}: expected {names}, got {type(value).__name__}")


def _validate_check(index: int, check: Any) -> None:
    where = f"checks[{index}]"
    _check_type(where, check, dict)
    for key, typ in (("name", str), ("status", str), ("message", str), ("figures", dict)):
        if key not in check:
            raise ResultsSchemaError(f"{where}: missing {key!r}")
        _check_type(f"{where}.{key}", check[key], typ)
    if check["status"] not in CHECK_STATUSES:
        raise ResultsSchemaError(
            f"{where}.status: {check['status']!r} is not one of {', '.join(CHECK_STATUSES)}"
        )


def _validate_workload(index: int, doc: Any) -> None:
    where = f"workloads[{index}]"
    _check_type(where, doc, dict)
    for key in ("workload", "schema_version", "verdict"):
        if key not in doc:
            raise ResultsSchemaError(f"{where}: missing {key!r} (not a Workload JSON document)")
    verdict = doc["verdict"]
    _check_type(f"{where}.verdict", verdict, dict)
    if verdict.get("status") not in ("pass", "fail", "inconclusive", "not_applicable"):
        raise ResultsSchemaError(
            f"{where}.verdict.status: {verdict.get('status')!r} is not "
            "pass, fail, inconclusive or not_applicable"
        )


def validate_results(doc: Any) -> None:
    """Raise :class:`ResultsSchemaError` naming the first field that is missing or wrong.

    Example: ``validate_results(json.loads(Path("results/gpu-a/RUN.json").read_text()))``
    """
    _check_type("document", doc, dict)
    for key, typ in _TOP_LEVEL.items():
        if key not in doc:
            raise ResultsSchemaError(f"missing top-level key {key!r}")
        _check_type(key, doc[key], typ)
    if doc["schema_version"] not in READABLE_VERSIONS:
        raise ResultsSchemaError(
            f"schema_version {doc['schema_version']} is not supported (this gpufleet reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}); use the gpufleet version that wrote it"
        )
    if doc["tier"] not in TIERS:
        raise ResultsSchemaError(f"tier: {doc['tier']!r} is not one of {', '.join(TIERS)}")
    if doc["status"] not in RUN_STATUSES:
        raise ResultsSchemaError(
            f"status: {doc['status']!r} is not one of {', '.join(RUN_STATUSES)}"
        )
    for index, check in enumerate(doc["checks"]):
        _validate_check(index, check)
    for index, workload in enumerate(doc["workloads"]):
        _validate_workload(index, workload)
    if doc["summary"] != summarize(doc["checks"]):
        raise ResultsSchemaError(
            f"summary {doc['summary']} does not match the checks ({summarize(doc['checks'])})"
        )
    expected = overall_status(doc["checks"], doc["run_error"], doc["schema_version"])
    if doc["status"] != expected:
        raise ResultsSchemaError(
            f"status {doc['status']!r} does not follow from the checks and run_error "
            f"(expected {expected!r})"
        )
    health = doc["gpu_health"]
    if health is not None:
        for key in ("gpus", "findings"):
            if not isinstance(health.get(key), list):
                raise ResultsSchemaError(f"gpu_health.{key}: expected a list")
    if doc["schema_version"] >= 3 or "vendor" in doc:
        if "vendor" not in doc:
            raise ResultsSchemaError("missing top-level key 'vendor' (schema_version 3)")
        try:
            validate_vendor(doc["vendor"])
        except VendorSectionError as exc:
            raise ResultsSchemaError(str(exc)) from None


def new_document(
    *,
    host: str,
    run_id: str,
    started_at: str,
    tier: str,
    target: str,
    spec: Mapping[str, Any],
    checks: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    gpu_health: dict[str, Any] | None,
    finished_at: str | None = None,
    duration_s: float | None = None,
    run_error: str | None = None,
    vendor: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a results document with its summary and status derived from the checks;
    ``vendor`` is the run's DCGM / nccl-tests section (both null when neither ran)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "host": host,
        "run_id": run_id,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_s": duration_s,
        "tier": tier,
        "target": target,
        "status": overall_status(checks, run_error),
        "run_error": run_error,
        "spec": dict(spec),
        "summary": summarize(checks),
        "checks": checks,
        "workloads": workloads,
        "gpu_health": gpu_health,
        "vendor": {"dcgm": None, "nccl_tests": None, **(vendor or {})},
    }
