"""Which transport NCCL used between the GPUs, from its ``NCCL_DEBUG=INFO`` log lines.

The all-reduce bandwidth means little without it: 8 NVLinked GPUs that NCCL connects through
shared memory (SHM, no peer-to-peer) or sockets (NET) are broken however fast the floor says
they are. NCCL logs one line per channel connection, e.g.
``host:798:813 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/direct pointer``, and its
NVLink SHARP state (``... 0 nvls channels``, ``NVLS multicast support is available on dev 0``).

Example:
    >>> t = parse_transports("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
    >>> t["kinds"], t["connections"]
    (['SHM'], {'SHM': 1})

Pure: text in, a dict out (what the allreduce workload records in its config).
"""

from __future__ import annotations

import re
from typing import Any

_CHANNEL_RE = re.compile(
    r"NCCL INFO Channel \d+(?:/\d+)? : \d+\[[0-9a-fx]+\] -> \d+\[[0-9a-fx]+\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>\S+)"
)
_NVLS_CHANNELS_RE = re.compile(r"(\d+) coll channels, \d+ collnet channels, (\d+) nvls channels")
_NVLS_SUPPORT_RE = re.compile(r"NVLS multicast support is (not )?available on dev (\d+)")
# The transport's name is its first two parts: P2P/IPC, P2P/direct, P2P/CUMEM, SHM/direct,
# NET/IB, NET/Socket; the kind is the first (what the review and the issue call them).
KINDS = ("P2P", "SHM", "NET", "COLLNET")


def transport_of(via: str) -> str:
    """``P2P/IPC/read`` -> ``P2P/IPC``; ``SHM/direct/direct`` -> ``SHM``; ``NET/IB/0/GDRDMA`` ->
    ``NET/IB``. SHM's further parts say who copies (direct or via a CE), not the path."""
    parts = via.split("/")
    if parts[0] == "SHM":
        return "SHM"
    return "/".join(parts[:2])


def parse_transports(text: str) -> dict[str, Any]:
    """Connections per transport, the kinds seen, the NVLS channels and NVLS support.

    ``nvls_channels``: the largest "N nvls channels" count logged (None when NCCL printed no
    such line); ``nvls_available``: True/False per device from the multicast-support lines.
    """
    connections: dict[str, int] = {}
    nvls_channels: int | None = None
    nvls_available: dict[str, bool] = {}
    for line in text.splitlines():
        channel = _CHANNEL_RE.search(line)
        if channel:
            name = transport_of(channel.group("via"))
            connections[name] = connections.get(name, 0) + 1
            continue
        counts = _NVLS_CHANNELS_RE.search(line)
        if counts:
            nvls_channels = max(nvls_channels or 0, int(counts.group(2)))
            continue
        support = _NVLS_SUPPORT_RE.search(line)
        if support:
            nvls_available[support.group(2)] = support.group(1) is None
    kinds = sorted({name.split("/")[0] for name in connections})
    return {
        "connections": dict(sorted(connections.items())),
        "kinds": kinds,
        "nvls_channels": nvls_channels,
        "nvls_available": nvls_available,
        "summary": summary(connections, nvls_channels),
    }


def summary(connections: dict[str, int], nvls_channels: int | None) -> str:
    """One line: "P2P/direct (6 connections); 0 NVLS channels", or why there is none."""
    if not connections:
        return "no NCCL channel lines (NCCL_DEBUG=INFO output missing or NCCL not used)"
    parts = [f"{name} ({n} connection{'s' if n != 1 else ''})" for name, n in connections.items()]
    text = ", ".join(parts)
    if nvls_channels is not None:
        text += f"; {nvls_channels} NVLS channel{'s' if nvls_channels != 1 else ''}"
    return text


def expected_kind_missing(transports: dict[str, Any], interconnect: str) -> str | None:
    """Why GPUs that are all NVLinked talked over SHM or NET (a P2P path is down), else None.

    Only where every pair is NVLink (nvlink, nvswitch): on a DGX-1 cube-mesh (nvlink_partial)
    some pairs have no P2P path by design and NCCL may connect them through SHM."""
    if interconnect not in ("nvlink", "nvswitch"):
        return None
    slow = [k for k in transports.get("kinds", []) if k in ("SHM", "NET")]
    if slow:
        return (
            f"NCCL used {', '.join(slow)} between {interconnect} GPUs: peer-to-peer is off "
            "for some pairs (NVLink down, ACS/IOMMU, or NCCL_P2P_DISABLE)"
        )
    return None
