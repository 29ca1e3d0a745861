"""Which workloads each validation tier runs; shared by the pytest suite and the periodic runner."""

# The quick tier (< 60 s of GPU time per process set; README "Time budget"): ResNet-50 AMP
# throughput per GPU against DLE's figure (catches low clocks, a slow GPU, broken cuDNN),
# MirroredStrategy scaling and every GPU busy, raw matmul throughput; each with --quick. The
# speed-ups of mixed precision and XLA need several builds of the reference step, so they run
# in the full tier, which runs every workload at size.
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
# Fresh processes per workload whose speed checks apply (validation.processes): the full tier
# runs 3, the quick tier 2 (the periodic runs; with the 5 % default spread a 1.2x-threshold
# feature still passes ~98 % of 2-process checks, and each run costs 2x, not 3x, the GPU time).
# A workload whose speed checks do not apply (no GPU) runs once.
PROCESSES = {"quick": 2, "full": 3}
