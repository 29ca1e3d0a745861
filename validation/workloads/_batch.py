"""Batch per GPU by memory: the published figure's batch where it fits, else the largest that does.

Review 2 N7: the XLA-off AMP ResNet-50 step at 256 per GPU keeps about 16.5 GB of activations
(Keras 3's unfused float32 batch norm casts), so a 16 GB V100 or T4 runs out of memory and the
workload crashes. The batch is therefore chosen from the GPU's memory: DLE's (or gpufleet's
default) batch when the estimate fits, else halved until it does. A figure measured at another
batch is then not the same measurement: its floor is not applied (``figure_mismatch``) and the
figure is reported only.

Example: ``fitting_batch("resnet50", "amp", 256, 16160, xla=False)`` -> 128; BERT-Large AMP
with XLA on the same 16 GB: ``fitting_batch("bert_large", "amp", 48, 16160, xla=True)`` -> 24.
"""

from __future__ import annotations

import math

from gpufleet.floors import references as refs
from gpufleet.matrix.gpus import GPUS
from validation.workloads._refsteps import BERT_LARGE, FIGURES, batch_per_gpu, bert_parameters
from validation.workloads._run import Run

# MiB kept for backward per sample, from review 2 §2.2's static trace of the Keras 3 ResNet-50
# step without XLA: 21.7 GB at batch 256 (FP32/TF32) and 16.5 GB (AMP, BF16 alike). With XLA the
# float32 batch-norm casts are fused away: DLE ran 256/GPU AMP with XLA on a 16 GB V100, so at
# most (16 GiB - the reserve) / 256 per sample; the float figure is kept as an upper bound.
# BERT-Large (sequence 128, 20 predictions): benchmarks/saved_activations.py's trace of the
# XLA-off step on TF 2.21 CPU, 346.2 MiB per sequence float and 226.3 AMP, plus 384 / 578 MiB
# fixed per step (AMP's float16 copies of the weights). With XLA: at most the XLA-off figure,
# and at most what DLE's own XLA run left per sequence (BERT_XLA_FIT below): AMP 211, float
# 346.2. Estimates, unverified on a GPU (review 2 §7): the probe measures ResNet-50's peak,
# ``python -m validation.workloads._probe_peak --step bert_large --xla`` BERT-Large's.
ACTIVATION_MIB: dict[tuple[str, str, bool], float] = {
    ("resnet50", "fp32", False): 21.7e9 / 256 / 2**20,
    ("resnet50", "amp", False): 16.5e9 / 256 / 2**20,
    ("resnet50", "fp32", True): 21.7e9 / 256 / 2**20,
    ("resnet50", "amp", True): 48.0,
    ("bert_large", "fp32", False): 346.2,
    ("bert_large", "amp", False): 226.3,
    ("bert_large", "fp32", True): 346.2,
    ("bert_large", "amp", True): 211.0,
}
FIXED_MIB: dict[tuple[str, str], float] = {
    ("bert_large", "fp32"): 384.0,
    ("bert_large", "amp"): 578.0,
}
# Weights, gradients, optimizer slots, cuDNN workspace and the CUDA context (ResNet-50 has
# 25.6 M parameters: well under 1 GiB of state), and a 10 % margin for the allocator's pieces.
RESERVE_MIB = 1536.0
# State beyond the reserve: BERT-Large's 366 M float32 weights, their gradients and LAMB's two
# slots (4 x 4 bytes per parameter, validation.workloads._refsteps.bert_parameters).
STATE_MIB = {"resnet50": 0.0, "bert_large": 4 * 4 * bert_parameters(BERT_LARGE) / 2**20}
# DLE's BERT TF2 runs (references.py, DGX A100 80GB, XLA on: scripts/run_pretraining_lamb.sh's
# default) fit 312 sequences AMP and 176 TF32 per 80 GB GPU; the XLA rows above fit them.
BERT_XLA_FIT = {"amp": (81920.0, 312), "fp32": (81920.0, 176)}
USABLE = 0.9
SMALLEST = 8


def _kind(precision: str) -> str:
    return "amp" if precision in ("amp", "bf16") else "fp32"


def needed_mib(step: str, precision: str, batch: int, *, xla: bool) -> float | None:
    """Estimated device memory of one training step at ``batch``; None: no estimate."""
    kind = _kind(precision)
    per_sample = ACTIVATION_MIB.get((step, kind, xla))
    if per_sample is None:
        return None
    fixed = RESERVE_MIB + STATE_MIB.get(step, 0.0) + FIXED_MIB.get((step, kind), 0.0)
    return fixed + batch * per_sample


def fitting_batch(
    step: str, precision: str, preferred: int, memory_mib: float | None, *, xla: bool
) -> int:
    """``preferred`` if its estimate fits ``memory_mib``, else the largest halving that does
    (at least SMALLEST); ``preferred`` when the memory or the estimate is unknown."""
    if memory_mib is None or memory_mib <= 0:
        return preferred
    batch = preferred
    while batch > SMALLEST:
        need = needed_mib(step, precision, batch, xla=xla)
        if need is None or need <= USABLE * memory_mib:
            return batch
        batch = max(SMALLEST, batch // 2)
    return batch


def gpu_memory_mib(run: Run) -> float | None:
    """The smallest GPU memory this run trains on: NVML's totals, else the model's datasheet."""
    known = [float(d["memory_mib"]) for d in run.devices if d.get("memory_mib")]
    if known:
        return min(known)
    model = next((m for m in GPUS.values() if m.name == run.gpu_model), None)
    return float(model.memory_gib * 1024) if model is not None and model.memory_gib else None


def batch_for(run: Run, step: str, precision: str, *, xla: bool) -> int:
    """The per-GPU batch of ``step`` at ``precision``: the figure's where it fits this GPU,
    recorded in config["batch_by_memory"] when memory made it smaller."""
    preferred = batch_per_gpu(step, precision, run.gpu_model)
    memory = gpu_memory_mib(run)
    batch = fitting_batch(step, precision, preferred, memory, xla=xla)
    if batch != preferred:
        need = needed_mib(step, precision, preferred, xla=xla) or math.nan
        run.config.setdefault("batch_by_memory", {})[f"{step}.{precision}.xla={xla}"] = {
            "batch": batch,
            "preferred": preferred,
            "memory_mib": memory,
            "needed_mib_at_preferred": round(need),
        }
    return batch


def figure_mismatch(gpu_model: str | None, step: str, precision: str, batch: int) -> str | None:
    """Why a published figure's floor does not apply at ``batch`` (it was measured at another),
    or None (same batch, or no published batch)."""
    if not gpu_model:
        return None
    ref = refs.published(gpu_model, f"{FIGURES[step]}.{precision}")
    if ref is None or not ref.batch_per_gpu or ref.batch_per_gpu == batch:
        return None
    return (
        f"not judged: batch {batch}/GPU (what fits this GPU's memory) is not the published "
        f"figure's {ref.batch_per_gpu}/GPU; the figure is reported"
    )
