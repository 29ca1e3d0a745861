"""The nccl-tests all-reduce figure of this host, handed to the TF all-reduce workload.

Contract (``--nccl-tests JSON`` or ``--nccl-tests @FILE`` of validation.workloads.allreduce)::

    {"busbw_gbps": 231.4, "bytes": 8589934592, "gpus": 8, "source": "vendor_diagnostics"}

``busbw_gbps``: all_reduce_perf's out-of-place busbw at its largest size ``bytes`` on ``gpus``
GPUs of this host (gpufleet.vendor.figure_of: ``largest_busbw``, ``largest_size``, ``ranks``).
The suite builds it (from_run) from the run's ``vendor.nccl_tests`` section where the run keeps
one, else from what validation/test_vendor_diagnostics.py::test_nccl_allreduce recorded; the
full tier runs the vendor checks before the workloads. A file written elsewhere only has to
hold these keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validation.json_argument import json_object

NCCL_CHECK = "test_nccl_allreduce"


class ReferenceError(ValueError):
    """A --nccl-tests value that does not follow the contract; says what is wrong."""


def read_reference(text: str | None) -> dict[str, Any] | None:
    """The contract's object from JSON or @FILE; None without one; ReferenceError when bad."""
    data = json_object(text, "--nccl-tests", ReferenceError)
    if data is None:
        return None
    busbw, gpus = data.get("busbw_gbps"), data.get("gpus")
    if not isinstance(busbw, (int, float)) or isinstance(busbw, bool) or busbw <= 0:
        raise ReferenceError(f"--nccl-tests: busbw_gbps must be a number > 0; got {busbw!r}")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 2:
        raise ReferenceError(f"--nccl-tests: gpus must be an integer >= 2; got {gpus!r}")
    size = data.get("bytes")
    if size is not None and (not isinstance(size, int) or size <= 0):
        raise ReferenceError(f"--nccl-tests: bytes must be a positive integer; got {size!r}")
    return {
        "busbw_gbps": float(busbw),
        "bytes": size,
        "gpus": gpus,
        "source": str(data.get("source") or "--nccl-tests"),
        "sizes": _sizes(data.get("sizes")),
    }


def _sizes(rows: Any) -> dict[str, float]:
    """{bytes (as text): busbw GB/s} from [{size_bytes, busbw_gbps}] or a {bytes: busbw} map
    (JSON keys are text); rows that are not a positive size with a positive busbw are left out."""
    items: list[tuple[Any, Any]] = []
    if isinstance(rows, Mapping):
        items = list(rows.items())
    elif isinstance(rows, list):
        items = [
            (r.get("size_bytes", r.get("size")), r.get("busbw_gbps", r.get("best_busbw")))
            for r in rows
            if isinstance(r, Mapping)
        ]
    out: dict[str, float] = {}
    for size, busbw in items:
        try:
            size_i, busbw_f = int(size), float(busbw)
        except (TypeError, ValueError):
            continue
        if size_i > 0 and busbw_f > 0:
            out[str(size_i)] = max(busbw_f, out.get(str(size_i), 0.0))
    return out


def busbw_at(reference: Mapping[str, Any], size: int) -> float | None:
    """nccl-tests' busbw at exactly ``size`` bytes (review 2, N10: TF's 1 GiB against the same
    row, not the sweep's largest), else None. The largest row counts when it is that size."""
    found = (reference.get("sizes") or {}).get(str(size))
    if found is not None:
        return float(found)
    if reference.get("bytes") == size:
        return float(reference["busbw_gbps"])
    return None


def from_run_figures(figures: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The contract's object from the suite's recorded figures (RunState.figures, keyed by
    pytest node id): test_nccl_allreduce's ``largest_busbw``/``largest_size``/``ranks``, when
    it ran, exited 0 and had no wrong results; else None."""
    for nodeid, entry in figures.items():
        if NCCL_CHECK not in nodeid:
            continue
        busbw, ranks = entry.get("largest_busbw"), entry.get("ranks")
        if entry.get("exit_code") or entry.get("wrong") or entry.get("out_of_bounds"):
            return None
        if isinstance(busbw, (int, float)) and busbw > 0 and isinstance(ranks, int) and ranks >= 2:
            rows = [
                {"size": r.get("size"), "best_busbw": _best(r)}
                for r in entry.get("rows") or ()
                if isinstance(r, Mapping)
            ]
            return {
                "busbw_gbps": float(busbw),
                "bytes": entry.get("largest_size"),
                "gpus": ranks,
                "source": "vendor_diagnostics::nccl_allreduce",
                "sizes": _sizes(rows),
            }
    return None


def from_vendor_section(section: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The contract's object from a results document's ``vendor.nccl_tests`` part
    (gpufleet.vendor.section.nccl_section: ``busbw_at_largest_gbps``, ``largest_size_bytes``,
    ``gpu_count``), when all_reduce_perf exited 0 with no wrong or out-of-bounds results."""
    if not isinstance(section, Mapping):
        return None
    if section.get("exit_code") or section.get("wrong") or section.get("out_of_bounds"):
        return None
    busbw, gpus = section.get("busbw_at_largest_gbps"), section.get("gpu_count")
    if not (isinstance(busbw, (int, float)) and busbw > 0 and isinstance(gpus, int) and gpus >= 2):
        return None
    return {
        "busbw_gbps": float(busbw),
        "bytes": section.get("largest_size_bytes"),
        "gpus": gpus,
        "source": "vendor.nccl_tests",
        "sizes": _sizes(section.get("sizes")),
    }


def _best(row: Mapping[str, Any]) -> float | None:
    """A parsed row's better busbw of out-of-place and in-place (NcclResultRow.best_busbw)."""
    values = [
        v for v in (row.get("busbw"), row.get("in_place_busbw")) if isinstance(v, (int, float))
    ]
    return max(values) if values else None


def from_run(state: Any) -> dict[str, Any] | None:
    """The contract's object from a suite run's state: its ``vendor`` section where the run
    keeps one (RunState.vendor["nccl_tests"]), else test_nccl_allreduce's recorded figures."""
    vendor = getattr(state, "vendor", None)
    if isinstance(vendor, Mapping) and vendor.get("nccl_tests") is not None:
        return from_vendor_section(vendor["nccl_tests"])
    return from_run_figures(getattr(state, "figures", {}) or {})
