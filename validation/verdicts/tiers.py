"""Which workloads each validation tier runs; shared by the pytest suite and the periodic runner."""

# The quick tier (< 60 s per host; docs/explanation/time-budget.md): ResNet-50 AMP throughput
# per GPU against DLE's figure (catches low clocks, a slow GPU, broken cuDNN), MirroredStrategy
# scaling and every GPU busy, raw matmul throughput; each with --quick, all three in ONE
# TensorFlow process (validation.workloads.bundle): TensorFlow's start on 8 GPUs (~20 s,
# assumed) would otherwise be paid three times. The speed-ups of mixed precision and XLA need
# several builds of the reference step, so they run in the full tier, at size.
QUICK_WORKLOADS = ("resnet50", "mirrored", "gemm")
FULL_WORKLOADS = (
    "resnet50",
    "bert_large",
    "mirrored",
    "mixed_precision",
    "xla",
    "input_pipeline",
    "memory_growth",
    "allreduce",
    "gemm",
    "grad_accumulation",
)
TIERS = {"quick": QUICK_WORKLOADS, "full": FULL_WORKLOADS}
# Wall-clock limits per workload on the host (coreutils `timeout`): a hung NCCL collective
# must not hang the whole validation run.
TIMEOUT_S = {"quick": 300, "full": 1800}
# Fresh processes per workload whose speed checks apply (validation.verdicts.processes), a budget:
# each starts with one and adds one while a speed check is inconclusive (review 2, N2), every
# verdict sharing alpha among the budget's looks. Quick: one (the bundle, < 60 s). Full:
# three, so that a healthy host at 1.10x a floor passes and a host with no effect does not
# (benchmarks/verdict_rates.py). From 5, the runs' own spread decides (validation.verdicts.judge).
PROCESSES = {"quick": 1, "full": 3}
# The quick tier's workloads share one process (validation.workloads.bundle); its limit is
# the sum of theirs.
BUNDLED = {"quick": QUICK_WORKLOADS}
# The workloads whose steps XLA compiles on a GPU, per tier (jit_compile=True): what the
# warm-up of XLA's persistent cache runs (validation.workloads.warm), each in the process
# layout its tier gives it. Quick: ResNet-50 AMP. Full: ResNet-50 and BERT-Large (TF32 and
# AMP), mirrored's XLA variant, the xla workload (its MLP and both ResNet-50 arms' XLA side).
# Without a GPU only the xla workload compiles.
XLA_COMPILED = {
    "quick": ("resnet50",),
    "full": ("resnet50", "bert_large", "mirrored", "xla", "mixed_precision"),
}
