"""Which GPU each single-GPU workload runs on: one in the quick tier, each in turn in the full.

A workload that trains on one GPU (resnet50, mixed_precision, xla, ...) but starts with every
GPU visible initialises TensorFlow, a CUDA context and cuBLAS on all of them (10-20 s and about
0.5 GiB each on an 8-GPU host). With ``CUDA_VISIBLE_DEVICES`` set to the GPU under test it
sees that one only; the full tier runs resnet50 on every GPU at once (one pinned process per
GPU), so a slow GPU 5 is found.
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes the ordinal the GPU's rank in PCI bus order, the order
nvidia-smi lists them in (validation.workloads._devices maps them back to NVML by bus id).

Example:
    >>> gpus_under_test("resnet50", "full", 4)
    ['0', '1', '2', '3']
    >>> gpus_under_test("xla", "full", 4)
    ['0']
    >>> gpus_under_test("allreduce", "full", 4)
    [None]
"""

from __future__ import annotations

import copy
import re
import statistics
from collections.abc import Mapping
from typing import Any

from gpufleet.floors.checks import outliers
from gpufleet.floors.derived import OUTLIER_BELOW_MEDIAN

# Workloads that use one GPU; the others (mirrored, allreduce, gemm) use every GPU at once.
SINGLE_GPU_WORKLOADS = frozenset(
    {
        "resnet50",
        "bert_large",
        "mixed_precision",
        "xla",
        "input_pipeline",
        "memory_growth",
        "grad_accumulation",
    }
)
# The single-GPU workloads the full tier runs on every GPU, all GPUs at once (one pinned
# process each, as a training job loads the host): ResNet-50 images/s per GPU against DLE's
# figure finds a slow GPU with a real training step. The others prove software features (mixed
# precision, XLA, tf.data, memory options), which do not differ between the GPUs of one host;
# they run on GPU 0, which keeps the full tier's time budget (docs/explanation/time-budget.md). GEMM
# (every GPU at once) and this one are the per-GPU hardware checks.
EVERY_GPU_IN_FULL = frozenset({"resnet50"})
_ORDINAL_RE = re.compile(r"^[0-9]{1,2}$")
# Per-GPU figures compared across the GPUs of a host (review 2 N11).
OUTLIER_FIGURES = ("resnet50.images_per_s.", "bert_large.sequences_per_s.")
_SEVERITY = ("fail", "inconclusive", "pass", "not_applicable")


class SelectionError(ValueError):
    """A GPU ordinal that is not one (it would reach a shell command)."""


def gpus_under_test(workload: str, tier: str, gpu_count: int) -> list[str | None]:
    """The CUDA ordinals to run ``workload`` on, one process set each; [None]: as it is (every
    GPU visible, or none on a GPU-less host)."""
    if workload not in SINGLE_GPU_WORKLOADS or gpu_count < 1:
        return [None]
    if tier == "quick" or workload not in EVERY_GPU_IN_FULL:
        return ["0"]
    return [str(i) for i in range(gpu_count)]


def visible_env(ordinal: str | None) -> dict[str, str]:
    """The environment that pins a process to GPU ``ordinal`` ({} for None)."""
    if ordinal is None:
        return {}
    if not _ORDINAL_RE.match(ordinal):
        raise SelectionError(f"GPU ordinal {ordinal!r} is not a number 0-99")
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ordinal}


DOC_SEPARATOR = "--- gpufleet: end of document ---"


def parallel_command(commands: Mapping[str, str]) -> str:
    """One shell command running every GPU's workload command at once (ordinal -> command,
    each printing one JSON document), printing the documents in ordinal order, each followed by
    DOC_SEPARATOR, and their logs on stderr. Outputs go to a private ``mktemp -d`` folder.

    Example: ``parallel_command({"0": cmd0, "1": cmd1})``; split with split_documents().
    """
    for ordinal in commands:
        visible_env(ordinal)  # refuses anything but a number: it names files below
    ordinals = sorted(commands, key=int)
    started = " ".join(f'( {commands[o]} ) >"$d/{o}" 2>"$d/{o}.err" &' for o in ordinals)
    shown = " ".join(
        f'cat "$d/{o}"; printf "\\n%s\\n" "{DOC_SEPARATOR}"; cat "$d/{o}.err" >&2;'
        for o in ordinals
    )
    return f'd=$(mktemp -d) && {{ {started} wait; }}; {shown} rm -rf "$d"'


def split_documents(stdout: str, ordinals: list[str]) -> dict[str, str]:
    """The text each GPU's process printed, from parallel_command's output."""
    parts = stdout.split(DOC_SEPARATOR)
    return {o: (parts[i].strip() if i < len(parts) else "") for i, o in enumerate(ordinals)}


def _status(doc: Mapping[str, Any]) -> str:
    return str((doc.get("verdict") or {}).get("status", "fail"))


def combine_gpus(docs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One workload document from one document per GPU (ordinal -> merged document).

    The first GPU's document is the base (its metrics and checks, as reports expect one
    document per workload); ``per_gpu`` keeps every GPU's verdict, metrics and failed checks;
    the verdict is the worst over the GPUs, naming the GPUs that decided it.
    """
    if not docs:
        raise ValueError("combine_gpus needs at least one document")
    ordinals = sorted(docs, key=int)
    if len(ordinals) == 1:
        only = copy.deepcopy(dict(docs[ordinals[0]]))
        only.setdefault("config", {})["gpu_under_test"] = ordinals[0]
        return only
    merged = copy.deepcopy(dict(docs[ordinals[0]]))
    merged.setdefault("config", {})["gpu_under_test"] = ordinals
    merged["per_gpu"] = {
        g: {
            "verdict": dict(docs[g].get("verdict") or {}),
            "metrics": dict(docs[g].get("metrics") or {}),
            "failed_checks": [c for c in docs[g].get("checks") or () if c.get("status") == "fail"],
        }
        for g in ordinals
    }
    slow = throughput_outliers(docs)
    worst = min((_status(docs[g]) for g in ordinals), key=_rank)
    if slow:
        merged["checks"] = [*(merged.get("checks") or ()), *slow]
        worst = "fail"
    if worst in ("fail", "inconclusive"):
        named = [g for g in ordinals if _status(docs[g]) == worst]
        reasons = "; ".join(
            [f"GPU {g}: {(docs[g].get('verdict') or {}).get('reason', '')}" for g in named]
            + [str(c["reason"]) for c in slow]
        )
        merged["verdict"] = {"status": worst, "reason": reasons}
        merged["checks"] = [
            *(merged.get("checks") or ()),
            *(
                {**c, "name": f"gpu{g}:{c.get('name')}"}
                for g in ordinals[1:]
                for c in docs[g].get("checks") or ()
                if c.get("status") == "fail"
            ),
        ]
    return merged


def throughput_outliers(docs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Review 2 N11: each GPU's reference-step figure against the host's median, the rule GEMM
    has (gpufleet.floors.checks.outliers, 10 % below the median with 3 GPUs or more).
    It needs no published figure, so H100, L4, L40S and T4 are judged too. One failed check
    per figure that has outliers."""
    figures: dict[str, dict[str, float]] = {}
    for gpu, doc in docs.items():
        for name, value in (doc.get("metrics") or {}).items():
            judged = name.startswith(OUTLIER_FIGURES) and not name.endswith("_ci")
            if judged and isinstance(value, (int, float)) and not isinstance(value, bool):
                figures.setdefault(name, {})[gpu] = float(value)
    checks = []
    for name, per_gpu in sorted(figures.items()):
        slow = outliers(per_gpu, OUTLIER_BELOW_MEDIAN)
        if slow:
            median = statistics.median(per_gpu.values())
            named = ", ".join(f"GPU {g} ({s:.0%} below)" for g, s in sorted(slow.items()))
            reason = (
                f"{name}: {named} more than {OUTLIER_BELOW_MEDIAN:.0%} below the host median "
                f"{median:g}"
            )
            checks.append(
                {"name": f"{name}.outliers", "kind": "speed", "status": "fail", "reason": reason}
            )
    return checks


def _rank(status: str) -> int:
    return _SEVERITY.index(status) if status in _SEVERITY else 0
