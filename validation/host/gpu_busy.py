"""Whether someone else is using the GPUs: a speed check on a busy GPU proves nothing.

A speed figure measured next to another job is that job's noise (a false fail), and the
measurement slows the job down. Before any speed work the workloads and the periodic run ask
here; a busy GPU makes their speed checks ``inconclusive: GPU busy (PIDs ...)``, never a fail,
and the periodic run does not start its workloads at all.

Busy means, on the GPUs this process can use (CUDA_VISIBLE_DEVICES; the full tier runs one
process per GPU side by side): a compute process other than ours (NVML's
nvmlDeviceGetComputeRunningProcesses, or ``nvidia-smi --query-compute-apps``), or a GPU's
utilization above BUSY_UTILIZATION_PCT (a job between processes, or one NVML cannot list, as in
a container with its own PID namespace).

Example:
    >>> busy_reason([GpuUser(4242, "python3", "0")], {"0": 97.0}, own_pids={1})
    'GPU busy (PIDs 4242 python3 on GPU 0; GPU 0 at 97 % utilization)'
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.compat import zip_strict

# NVML utilization of an idle GPU reads 0 %; monitoring agents (DCGM, nvidia-smi polling)
# flick it to 1-3 %. Above this a kernel ran for that share of the last averaging window.
BUSY_UTILIZATION_PCT = 5.0
# NVML averages utilization over 1/6 s to 1 s depending on the product: a few readings
# spread over a second see a job between two kernels.
READINGS = 3
READING_GAP_S = 0.4
NVIDIA_SMI_TIMEOUT_S = 30
APPS_QUERY = ["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid", "--format=csv"]
GPU_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu", "--format=csv"]


@dataclass(frozen=True)
class GpuUser:
    """One compute process on one GPU; ``gpu`` as nvidia-smi numbers it (or its UUID)."""

    pid: int | None
    name: str | None
    gpu: str


def busy_reason(
    users: Iterable[GpuUser],
    utilization: Mapping[str, float],
    *,
    own_pids: Collection[int] = (),
    limit_pct: float = BUSY_UTILIZATION_PCT,
) -> str | None:
    """``GPU busy (...)`` naming the other processes and the busy GPUs, or None when idle."""
    others = [u for u in users if u.pid is None or u.pid not in own_pids]
    hot = {gpu: pct for gpu, pct in utilization.items() if pct > limit_pct}
    if not others and not hot:
        return None
    parts = []
    if others:
        listed = ", ".join(
            f"{u.pid if u.pid is not None else '?'} {u.name or '?'} on GPU {u.gpu}"
            for u in sorted(others, key=lambda u: (u.gpu, u.pid or 0))
        )
        parts.append(f"PIDs {listed}")
    if hot:
        listed = ", ".join(f"GPU {g} at {p:g} %" for g, p in sorted(hot.items()))
        parts.append(f"{listed} utilization")
    return f"GPU busy ({'; '.join(parts)})"


def visible(indices: list[int], uuids: list[str], cuda_visible: str | None) -> list[int]:
    """Positions of the NVML devices this process can use: all without CUDA_VISIBLE_DEVICES,
    else the ones it names by ordinal (PCI bus order, as the suite sets CUDA_DEVICE_ORDER) or
    by UUID prefix. The full tier's per-GPU processes run side by side, one per GPU: each
    judging every GPU saw its siblings as another job (review 2, N3)."""
    if cuda_visible is None:
        return list(range(len(indices)))
    chosen: list[int] = []
    for entry in (e.strip() for e in cuda_visible.split(",")):
        if not entry:
            break
        if entry.lstrip("-").isdigit():
            if int(entry) < 0:
                break  # CUDA stops at the first invalid ordinal
            found = [i for i, index in enumerate(indices) if index == int(entry)]
        else:
            found = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
        chosen += [i for i in found if i not in chosen]
    return chosen


def from_nvml(nvml: Any, handles: list[Any], gpu_names: list[str]) -> tuple[list[GpuUser], dict]:
    """Compute processes and the highest of READINGS utilization readings per GPU, via NVML."""
    users: list[GpuUser] = []
    utilization: dict[str, float] = {}
    for handle, gpu in zip_strict(handles, gpu_names):
        for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            users.append(GpuUser(int(process.pid), _process_name(nvml, process.pid), gpu))
    for reading in range(READINGS):
        if reading:
            time.sleep(READING_GAP_S)
        for handle, gpu in zip_strict(handles, gpu_names):
            try:
                pct = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:  # NotSupported on a MIG-enabled GPU: its processes still count
                continue
            utilization[gpu] = max(utilization.get(gpu, 0.0), pct)
    return users, utilization


def _process_name(nvml: Any, pid: int) -> str | None:
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
    except Exception:  # a process that just exited, or another PID namespace
        return None
    text = name.decode() if isinstance(name, bytes) else str(name)
    return os.path.basename(text) or None


def parse_gpu_utilization(text: str) -> tuple[dict[str, str], dict[str, float]]:
    """``nvidia-smi --query-gpu=index,uuid,utilization.gpu[,...] --format=csv`` -> ({uuid:
    index}, {index: percent}). The header names the columns (other columns are ignored);
    "[N/A]" utilization (MIG mode) reads as 0."""
    uuids: dict[str, str] = {}
    utilization: dict[str, float] = {}
    columns: dict[str, int] = {"index": 0, "uuid": 1, "utilization.gpu": 2}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        names = [c.split(" [")[0].strip() for c in cells]
        if "index" in names and "uuid" in names:
            columns = {name: i for i, name in enumerate(names)}
            continue
        try:
            index, uuid = cells[columns["index"]], cells[columns["uuid"]]
            pct = cells[columns["utilization.gpu"]]
        except (IndexError, KeyError):
            continue
        if not index.isdigit():
            continue
        uuids[uuid] = index
        number = pct.removesuffix("%").strip()
        utilization[index] = float(number) if number.replace(".", "", 1).isdigit() else 0.0
    return uuids, utilization


def from_nvidia_smi(
    run: Callable[..., Any] = subprocess.run,
) -> tuple[list[GpuUser], dict[str, float]]:
    """The same facts through nvidia-smi (the periodic runner has no pynvml); OSError or
    RuntimeError (with nvidia-smi's own words) when it cannot say."""
    from gpufleet.parsers.system import parse_gpu_processes

    outputs = []
    for command in (GPU_QUERY, APPS_QUERY):
        done = run(
            command, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip().splitlines()
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}: {said[0] if said else ''}"
            )
        outputs.append(done.stdout)
    index_of, utilization = parse_gpu_utilization(outputs[0])
    users = [
        GpuUser(p.pid, p.process_name, index_of.get(p.gpu_uuid or "", p.gpu_uuid or "?"))
        for p in parse_gpu_processes(outputs[1], ("pid", "process_name", "gpu_uuid"))
        if p.pid is not None or p.gpu_uuid
    ]
    return users, utilization


def check_with_nvidia_smi(
    own_pids: Collection[int] = (), run: Callable[..., Any] = subprocess.run
) -> str | None:
    """busy_reason from nvidia-smi; a GPU whose state cannot be read counts as busy (the
    periodic run must not guess that a production GPU is free)."""
    try:
        users, utilization = from_nvidia_smi(run)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"GPU busy state unknown ({exc})"
    return busy_reason(users, utilization, own_pids=own_pids)
