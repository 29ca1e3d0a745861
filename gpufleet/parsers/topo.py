"""Parse the GPU/NIC connection matrix of ``nvidia-smi topo -m``."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any


class TopoParseError(ValueError):
    """The text holds no ``nvidia-smi topo -m`` matrix."""


# nvidia-smi makes the header row bold when it writes to a terminal.
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Column titles that contain spaces; everything else in the header is one word.
_AFFINITY_TITLES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND_RE = re.compile(r"^\s*(?P<label>NIC\d+):\s*(?P<name>\S+)\s*$")
_GPU_LABEL_RE = re.compile(r"^GPU\d+$")
_NVLINK_RE = re.compile(r"^NV(?P<count>\d+)$")


@dataclass(frozen=True)
class TopoMatrix:
    """The ``nvidia-smi topo -m`` matrix: devices in order and the link between any two.

    Links are nvidia-smi's own words: "X" (self), "NV18" (18 bonded NVLinks), "PIX", "PXB",
    "PHB", "NODE", "SYS".
    """

    gpus: list[str]  # ["GPU0", "GPU1", ...] in column order
    nics: list[str]  # ["NIC0", ...] (newer drivers) or ["mlx5_0", ...] (older ones)
    nic_names: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_2" (NIC Legend)
    links: dict[str, dict[str, str]] = field(default_factory=dict)  # row -> column -> link
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)  # "GPU0" -> "0-47,96-143"
    numa_affinity: dict[str, str | None] = field(default_factory=dict)  # "GPU0" -> "0"

    def _label(self, device: str | int) -> str:
        return f"GPU{device}" if isinstance(device, int) else device

    def link(self, a: str | int, b: str | int) -> str:
        """The link between two devices ("GPU0" or 0, "NIC3"); the matrix is symmetric.

        >>> TopoMatrix(gpus=["GPU0", "GPU1"], nics=[], links={"GPU0": {"GPU1": "NV12"}}).link(1, 0)
        'NV12'
        """
        first, second = self._label(a), self._label(b)
        known = self.gpus + self.nics
        for device in (first, second):
            if device not in known:
                raise KeyError(
                    f"{device!r} is not in the topology matrix; it lists {', '.join(known)}"
                )
        if first == second:
            return "X"
        for row, column in ((first, second), (second, first)):
            value = self.links.get(row, {}).get(column)
            if value is not None:
                return value
        raise KeyError(
            f"the topology matrix has no cell for {first}/{second} (the pasted output is "
            "cut short); capture the full `nvidia-smi topo -m` output"
        )

    def nvlinks(self, a: str | int, b: str | int) -> int:
        """How many bonded NVLinks join two GPUs: 18 for "NV18", 0 for PCIe-only links."""
        match = _NVLINK_RE.match(self.link(a, b))
        return int(match["count"]) if match else 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _header_columns(line: str) -> list[str]:
    for title in _AFFINITY_TITLES:
        line = line.replace(title, title.replace(" ", "\0"))
    return [column.replace("\0", " ") for column in line.split()]


def _is_header(tokens: list[str]) -> bool:
    # The header starts with "GPU0" followed by another column title; a row starting with
    # "GPU0" is followed by its own cell, "X".
    return len(tokens) >= 2 and tokens[0] == "GPU0" and tokens[1] != "X"


def _cell(value: str) -> str | None:
    return None if value in ("", "N/A") else value


def parse_nvidia_smi_topo(text: str) -> TopoMatrix:
    """The device order and pairwise links of ``nvidia-smi topo -m``.

    Accepts tab- or space-separated output, NIC rows and columns, the CPU Affinity / NUMA
    Affinity / GPU NUMA ID columns, ANSI bold escapes, and output with or without legends.

    >>> topo = parse_nvidia_smi_topo("\\tGPU0\\tGPU1\\tCPU Affinity\\n"
    ...     "GPU0\\t X \\tNV4\\t0-11\\nGPU1\\tNV4\\t X \\t0-11\\n")
    >>> topo.gpus, topo.link("GPU0", "GPU1"), topo.nvlinks(0, 1)
    (['GPU0', 'GPU1'], 'NV4', 4)
    """
    lines = [_ANSI_RE.sub("", line) for line in text.splitlines()]
    header_index = next(
        (index for index, line in enumerate(lines) if _is_header(_header_columns(line))), None
    )
    if header_index is None:
        raise TopoParseError(
            "no `nvidia-smi topo -m` matrix found (expected a header line starting with "
            "GPU0); if nvidia-smi printed an error instead, run `gpufleet diagnose` on it"
        )

    columns = _header_columns(lines[header_index])
    devices = [column for column in columns if column not in _AFFINITY_TITLES]
    extra = columns[len(devices) :]
    gpus = [device for device in devices if _GPU_LABEL_RE.match(device)]
    nics = [device for device in devices if not _GPU_LABEL_RE.match(device)]

    links: dict[str, dict[str, str]] = {}
    cpu_affinity: dict[str, str | None] = {}
    numa_affinity: dict[str, str | None] = {}
    nic_names: dict[str, str] = {}
    for line in lines[header_index + 1 :]:
        legend = _NIC_LEGEND_RE.match(line)
        if legend:
            nic_names[legend["label"]] = legend["name"]
            continue
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            continue  # blank line, "Legend:" text, interleaved noise
        # Splitting on any whitespace also drops the empty cell nvidia-smi leaves before
        # "GPU NUMA ID" when it aligns with tabs.
        cells = tokens[1 : 1 + len(devices)]
        links[tokens[0]] = dict(zip(devices, cells))  # noqa: B905 (hosts may run Python 3.9)
        trailing = dict(zip(extra, tokens[1 + len(devices) :]))  # noqa: B905 (hosts may run Python 3.9)
        if tokens[0] in gpus:
            if "CPU Affinity" in extra:
                cpu_affinity[tokens[0]] = _cell(trailing.get("CPU Affinity", ""))
            if "NUMA Affinity" in extra:
                numa_affinity[tokens[0]] = _cell(trailing.get("NUMA Affinity", ""))

    if not links:
        raise TopoParseError(
            "the `nvidia-smi topo -m` header was found but no device rows follow it; "
            "capture the whole output, not just the first line"
        )
    return TopoMatrix(
        gpus=gpus,
        nics=nics,
        nic_names=nic_names,
        links=links,
        cpu_affinity=cpu_affinity,
        numa_affinity=numa_affinity,
    )
