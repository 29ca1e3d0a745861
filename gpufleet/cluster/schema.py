"""The cluster tier's results document, one per group run, and its check.

``<results-dir>/cluster/<group>/<run_id>.json``::

    {
      "schema": "gpufleet-cluster-results", "schema_version": 1,
      "run_id": str, "group": str, "tier": "cluster",
      "started_at": ISO 8601, "finished_at": ISO 8601 | null,
      "status": "pass" | "fail" | "error",        # error: the run itself broke (run_error)
      "run_error": str,                           # "" when it ran
      "hosts": [{"name", "address", "interconnect_gbps", "gpu_less"}],
      "checks": [{"name", "status": pass|fail|skipped|error, "reason", "figures": {}}],
      "network": {"mode": "all_pairs" | "ring", "margin", "latency_max_ms", "iperf3": {},
                  "links": [{"source", "target", "gbps", "floor_gbps", "declared_gbps",
                             "latency_ms", "loss_pct", "interface", "mtu", "status",
                             "reason", "error", "failed_tries": [iperf3 errors before
                             the try that counted]}]},
      "training": {"status", "reason", "named", "workers": [...], "reference": {...},
                   "launcher": "ssh" | "srun", "identical_weights", "max_weight_diff_vs_single",
                   "loss_rel_diff_vs_single", "speed": {"status", "reason"}},
      "nccl_tests": {"status", "reason"}             # skipped ("no GPU", no MPI build) or
                  | {"status", "reason", "launcher": "mpirun" | "srun", "command": [argv],
                     "figures": {"max_busbw_gbps", "largest_busbw_gbps", "largest_size",
                                 "avg_busbw_gbps", "wrong", "ranks", "gpus_per_host",
                                 "gpu_model", "network": "ib" | "efa" | "socket" | "unknown",
                                 "transport": NCCL's channel summary, "fabric_gbps",
                                 "floors": [{"name", "busbw_gbps", "enforced", "source"}],
                                 "advisory": [advisory floors missed]},
                     "pairs": [{"hosts": [a, b], "status", "reason"}]},  # the culprit runs
      "culprits": [{"check": "network" | "training" | "nccl_tests", "hosts": [names],
                    "how": str}],
      "cleanup": {host: "clean" | "left: ..." | "clean-up could not run ..."}
    }

``network``, ``training`` and ``nccl_tests`` are null when the run stopped before them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.cluster.config import ClusterHost

SCHEMA = "gpufleet-cluster-results"
SCHEMA_VERSION = 1
RUN_STATUSES = ("pass", "fail", "error")
CHECK_STATUSES = ("pass", "fail", "skipped", "error")


class ClusterResultsError(ValueError):
    """A cluster results document that does not follow the schema above."""


def new_document(
    *, run_id: str, group: str, hosts: Sequence[ClusterHost], started_at: str
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "group": group,
        "tier": "cluster",
        "started_at": started_at,
        "finished_at": None,
        "status": "error",
        "run_error": "",
        "hosts": [
            {
                "name": h.name,
                "address": h.address,
                "interconnect_gbps": h.interconnect_gbps,
                "gpu_less": h.gpu_less,
            }
            for h in hosts
        ],
        "checks": [],
        "network": None,
        "training": None,
        "nccl_tests": None,
        "culprits": [],
        "cleanup": {},
    }


def _need(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise ClusterResultsError(f"{where}: {key!r} is missing")
    if not isinstance(doc[key], kind):
        raise ClusterResultsError(f"{where}: {key!r} is {type(doc[key]).__name__}")
    return doc[key]


def validate_cluster_results(doc: Mapping[str, Any]) -> None:
    """Raise ClusterResultsError unless ``doc`` follows the schema in this module's docstring."""
    if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
        raise ClusterResultsError(f"not a {SCHEMA} v{SCHEMA_VERSION} document")
    for key in ("run_id", "group", "started_at", "run_error"):
        _need(doc, key, str, "document")
    if _need(doc, "status", str, "document") not in RUN_STATUSES:
        raise ClusterResultsError(f"document: status {doc['status']!r}")
    for host in _need(doc, "hosts", list, "document"):
        _need(host, "name", str, "host")
        _need(host, "interconnect_gbps", int, "host")
    for check in _need(doc, "checks", list, "document"):
        _need(check, "name", str, "check")
        if _need(check, "status", str, check["name"]) not in CHECK_STATUSES:
            raise ClusterResultsError(f"{check['name']}: status {check['status']!r}")
        _need(check, "reason", str, check["name"])
        _need(check, "figures", dict, check["name"])
    if doc.get("network") is not None:
        for link in _need(doc["network"], "links", list, "network"):
            for key in ("source", "target", "status"):
                _need(link, key, str, "link")
            _need(link, "gbps", (int, float), "link")
    nccl = doc.get("nccl_tests")
    if nccl is not None:
        if _need(nccl, "status", str, "nccl_tests") not in CHECK_STATUSES:
            raise ClusterResultsError(f"nccl_tests: status {nccl['status']!r}")
        _need(nccl, "reason", str, "nccl_tests")
        if "figures" in nccl:
            _need(nccl, "figures", dict, "nccl_tests")
            _need(nccl, "command", list, "nccl_tests")
            _need(nccl, "pairs", list, "nccl_tests")
    for entry in _need(doc, "culprits", list, "document"):
        _need(entry, "hosts", list, "culprit")
        _need(entry, "how", str, "culprit")
    _need(doc, "cleanup", dict, "document")
