"""Classify the host's GPU interconnect from ``nvidia-smi topo -m`` for the all-reduce floor."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

# nvidia-smi's PCIe link words, fastest first, and the class each one makes the slowest pair.
# "SOC" is what drivers before ~384 printed for today's "SYS".
_PCIE_CLASSES = {
    "PIX": "pcie_switch",
    "PXB": "pcie_switch",
    "PHB": "pcie_host_bridge",
    "NODE": "pcie_host_bridge",
    "SYS": "cross_socket",
    "SOC": "cross_socket",
}
_PCIE_ORDER = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
_NVLINK_RE = re.compile(r"^NV\d+$")
TOPO_TIMEOUT_S = 30


@dataclass(frozen=True)
class GpuTopology:
    """The interconnect class of a host's GPUs and the evidence for it.

    ``name`` is one of validation.verdicts.thresholds.TOPOLOGY_CLASSES; ``links`` counts the
    unordered GPU pairs per nvidia-smi link word ({"NV12": 28}); ``slowest`` is the slowest of them.
    """

    name: str
    gpus: int = 0
    links: dict[str, int] = field(default_factory=dict)
    slowest: str | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "gpus": self.gpus,
            "links": dict(self.links),
            "slowest_link": self.slowest,
            "reason": self.reason,
        }


def classify(matrix: Any) -> GpuTopology:
    """The class of a parsed ``nvidia-smi topo -m`` matrix (a gpufleet.parsers TopoMatrix).

    The slowest GPU pair decides, as a ring all-reduce runs at the pace of its slowest hop.

    Example:
        >>> from gpufleet.parsers import parse_nvidia_smi_topo
        >>> text = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPHB\\nGPU1\\tPHB\\t X \\n"
        >>> classify(parse_nvidia_smi_topo(text)).name
        'pcie_host_bridge'
    """
    gpus = list(matrix.gpus)
    if len(gpus) < 2:
        return GpuTopology("single_gpu", gpus=len(gpus), reason="one GPU: nothing to link")
    try:
        pairs = Counter(matrix.link(a, b) for a, b in combinations(gpus, 2))
    except KeyError as exc:
        return GpuTopology("unknown", gpus=len(gpus), reason=str(exc.args[0]))
    links = dict(sorted(pairs.items()))
    nvlink = {word for word in pairs if _NVLINK_RE.match(word)}
    pcie = set(pairs) - nvlink
    unknown = pcie - set(_PCIE_CLASSES)
    if unknown:
        return GpuTopology(
            "unknown",
            gpus=len(gpus),
            links=links,
            reason=f"link word(s) {sorted(unknown)} unknown to gpufleet; set "
            "allreduce_busbw_min_gbps in the inventory's thresholds",
        )
    if not pcie:
        slowest = min(nvlink, key=lambda word: int(word[2:]))
        return GpuTopology(
            "nvlink", len(gpus), links, slowest, f"all {sum(pairs.values())} GPU pairs NVLink"
        )
    slowest = max(pcie, key=_PCIE_ORDER.index)
    if nvlink:
        return GpuTopology(
            "nvlink_partial",
            len(gpus),
            links,
            slowest,
            f"{sum(pairs[w] for w in nvlink)} of {sum(pairs.values())} GPU pairs NVLink, "
            f"the others down to {slowest}",
        )
    return GpuTopology(
        _PCIE_CLASSES[slowest], len(gpus), links, slowest, f"slowest GPU pair {slowest}"
    )


def host_topology(has_gpu: bool) -> GpuTopology:
    """Run ``nvidia-smi topo -m`` and classify it; "no_gpu" without a GPU, and "unknown"
    (with the reason) when nvidia-smi or gpufleet's parser is not there or fails."""
    if not has_gpu:
        return GpuTopology("no_gpu", reason="no GPU")
    try:
        from gpufleet.parsers import parse_nvidia_smi_topo
        from gpufleet.parsers.topo import TopoParseError
    except ImportError as exc:
        return GpuTopology(
            "unknown", reason=f"gpufleet.parsers is not importable ({exc}); redeploy the payload"
        )
    try:
        done = subprocess.run(
            ["nvidia-smi", "topo", "-m"],
            capture_output=True,
            text=True,
            timeout=TOPO_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuTopology("unknown", reason=f"nvidia-smi topo -m could not run: {exc}")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return GpuTopology(
            "unknown",
            reason=f"nvidia-smi topo -m exited {done.returncode}: {said[0] if said else ''}",
        )
    try:
        return classify(parse_nvidia_smi_topo(done.stdout))
    except TopoParseError as exc:
        return GpuTopology("unknown", reason=f"nvidia-smi topo -m output not understood: {exc}")
