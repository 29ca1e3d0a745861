"""The vendor section (DCGM's result, nccl-tests figures) as Prometheus gauge families.

Standard library only, like gpufleet.report.prometheus, which adds these families to every
textfile. Unlike the other families these carry a ``host`` label, the inventory name of the
host the figures belong to: a textfile rendered on the control node (or copied between
hosts) must still say whose all-reduce bandwidth it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufleet.report.figures import number
from gpufleet.report.vendor_section import TEST_STATUSES, VERDICTS, vendor_of


def _dcgm(host: str, dcgm: Mapping[str, Any] | None, family: Any) -> list[Any]:
    result = family(
        "gpufleet_dcgm_diag_result",
        "The last dcgmi diag run's verdict (pass, fail, error: output not trusted, skip: not "
        "run or nothing proven, warn): 1 for its verdict, 0 for the others.",
    )
    tests = family("gpufleet_dcgm_diag_tests", "dcgmi diag results per status in the last run.")
    test = family(
        "gpufleet_dcgm_diag_test_passed",
        '1 when the DCGM test passed on the GPU (gpu "": system-wide), 0 when it failed or '
        "warned; skipped tests are left out.",
    )
    if dcgm is None:
        return [result, tests, test]
    level = "" if dcgm.get("level") is None else str(dcgm["level"])
    for candidate in VERDICTS:
        if candidate != "no_floor":
            result.add(candidate == dcgm.get("status"), host=host, level=level, status=candidate)
    entries = [t for t in dcgm.get("tests") or () if isinstance(t, Mapping)]
    if entries or dcgm.get("overall") is not None:
        for status in TEST_STATUSES:
            count = sum(t.get("status") == status for t in entries)
            tests.add(count, host=host, level=level, status=status)
    for entry in entries:
        if entry.get("status") == "skip":
            continue
        gpu = "" if entry.get("gpu") is None else str(entry["gpu"])
        labels = {"host": host, "level": level, "test": str(entry.get("name", "")), "gpu": gpu}
        test.add(entry.get("status") == "pass", **labels)
    return [result, tests, test]


def _nccl(host: str, nccl: Mapping[str, Any] | None, family: Any) -> list[Any]:
    busbw = family(
        "gpufleet_nccl_busbw_gbps",
        "nccl-tests all_reduce_perf bus bandwidth per message size (bytes), GB/s, the better "
        "of out-of-place and in-place.",
    )
    average = family("gpufleet_nccl_avg_busbw_gbps", "nccl-tests' 'Avg bus bandwidth', GB/s.")
    floor = family(
        "gpufleet_nccl_busbw_floor_gbps",
        "The published floor the nccl-tests figure was judged against, GB/s (source in the "
        "results JSON).",
    )
    wrong = family("gpufleet_nccl_wrong", "nccl-tests #wrong results in the last run (0: good).")
    verdict = family(
        "gpufleet_nccl_verdict",
        "The nccl-tests verdict (pass, fail, warn: below an advisory floor, no_floor: measured, "
        "not judged, error): 1 for its verdict, 0 for the others.",
    )
    families = [busbw, average, floor, wrong, verdict]
    if nccl is None:
        return families
    rows = [r for r in nccl.get("sizes") or () if isinstance(r, Mapping)]
    if not rows and number(nccl.get("busbw_at_largest_gbps")) is not None:
        # Documents before schema_version 3 kept only the largest size's figure.
        rows = [
            {
                "size_bytes": nccl.get("largest_size_bytes"),
                "busbw_gbps": nccl["busbw_at_largest_gbps"],
            }
        ]
    per_size: dict[str, float] = {}
    for row in rows:  # a size printed twice (size-0 rows) keeps its last row: one series each
        value = number(row.get("busbw_gbps"))
        if value is not None:
            size = row.get("size_bytes")
            per_size["" if size is None else str(int(size))] = value
    for size, value in per_size.items():
        busbw.add(value, host=host, size=size)
    if number(nccl.get("avg_busbw_gbps")) is not None:
        average.add(float(nccl["avg_busbw_gbps"]), host=host)
    given = nccl.get("floor")
    if isinstance(given, Mapping) and number(given.get("busbw_gbps")) is not None:
        floor.add(float(given["busbw_gbps"]), host=host, metric=str(given.get("metric") or ""))
    if isinstance(nccl.get("wrong"), int):
        wrong.add(float(nccl["wrong"]), host=host)
    for candidate in VERDICTS:
        verdict.add(candidate == nccl.get("status"), host=host, verdict=candidate)
    return families


def vendor_families(doc: Mapping[str, Any], family: Any) -> list[Any]:
    """The DCGM and nccl-tests families of one results document; ``family`` makes one
    (gpufleet.report.prometheus.Family)."""
    section = vendor_of(doc)
    host = str(doc.get("host", ""))
    return [*_dcgm(host, section["dcgm"], family), *_nccl(host, section["nccl_tests"], family)]
