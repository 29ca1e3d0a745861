"""How the suite runs NVIDIA's own diagnostics on a host: the commands and what they mean."""

from __future__ import annotations

import shlex
from typing import Any

# dcgmi diag levels per tier (NVIDIA's dcgmi-diag reference: -r 1 seconds, -r 3 ~15 min).
DCGM_LEVELS = {"quick": 1, "full": 3}
# Generous limits per level (the reference's times, with room for an 8-GPU host); -r 4 runs
# memtest and the pulse test, 45 min to 2.25 h on AWS's p4d/p5 (anchor research, section 4).
DCGM_TIMEOUT_S = {1: 300, 2: 1200, 3: 3600, 4: 4 * 3600}
NCCL_TESTS_TIMEOUT_S = 1200
# What the suite and the periodic run say when DCGM is off, or missing on a GPU host.
DCGM_OFF = "dcgm: off in the inventory"
DCGMI_MISSING = (
    "dcgmi is not installed though this host has NVIDIA GPUs; run the deploy (stage dcgm) "
    "or set dcgm: off"
)


def dcgm_level(spec: Any, tier: str) -> int:
    """The inventory's ``dcgm_diag_level``, else the tier's (quick 1, full 3)."""
    return int(spec.dcgm_diag_level or DCGM_LEVELS[tier])


def dcgm_command(level: int) -> str:
    """``dcgmi diag -r LEVEL -j``, bounded by ``timeout``; prints ``rc=N`` on its last line."""
    limit = DCGM_TIMEOUT_S[level]
    return f"timeout {limit} dcgmi diag -r {int(level)} -j; echo rc=$?"


def nccl_tests_command(binary: str, gpus: int, min_bytes: str, max_bytes: str) -> str:
    """``all_reduce_perf -b MIN -e MAX -f 2 -g GPUS`` (one process, every GPU), bounded."""
    args = ["-b", min_bytes, "-e", max_bytes, "-f", "2", "-g", str(int(gpus))]
    quoted = " ".join(shlex.quote(a) for a in [binary, *args])
    return f"timeout {NCCL_TESTS_TIMEOUT_S} {quoted} 2>&1; echo rc=$?"


def split_rc(output: str) -> tuple[str, int | None]:
    """Output of a command ending ``; echo rc=$?`` -> (its own output, its exit code)."""
    body, sep, last = output.rstrip("\n").rpartition("\n")
    if not sep:
        body, last = "", output.strip()
    if last.startswith("rc=") and last[3:].isdigit():
        return body, int(last[3:])
    return output, None
