"""Published healthy figures per GPU model: the table the validation floors are derived from."""

from __future__ import annotations

from dataclasses import dataclass

# Where each figure was read. DLE = NVIDIA/DeepLearningExamples; the commit is the version the
# figures were read from (the READMEs have not changed these tables since).
DLE = "NVIDIA/DeepLearningExamples"
DLE_RN50 = "TensorFlow/Classification/ConvNets/resnet50v1.5/README.md"
DLE_RN50_COMMIT = "1d4211fe9d94550d7bc72bb9b0ac4f576533ca52"
DLE_BERT = "TensorFlow2/LanguageModeling/BERT/README.md"
DLE_BERT_COMMIT = "49e23b4597a6fca461321a085d8eb8abf1e215e2"
REVIEW = "/work/shared/reviews/workload-gpu-review.md"

V100_SXM2 = ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB")
A100_40 = ("NVIDIA A100-SXM4-40GB",)
A100_80 = ("NVIDIA A100-SXM4-80GB",)
# DLE measured the 40GB SXM4; the 80GB SXM4 has the same SMs and clocks and more bandwidth.
A100_SXM = A100_40 + A100_80
H100_SXM = ("NVIDIA H100 80GB HBM3",)


@dataclass(frozen=True)
class Source:
    """Where a figure is printed: repository + path + the table's heading (or a URL/thread)."""

    where: str
    heading: str
    commit: str = ""

    def __str__(self) -> str:
        at = f"@{self.commit[:8]}" if self.commit else ""
        return f"{self.where}{at}, {self.heading!r}"


@dataclass(frozen=True)
class Reference:
    """One published figure: ``value`` is None where nothing is published (see ``note``).

    ``figure`` is the floor name the value feeds, e.g. ``resnet50.images_per_s.amp``; values
    are per GPU (throughput) even for ``gpu_count`` 8 rows, so 8-GPU rows give weak scaling.
    """

    figure: str
    gpus: tuple[str, ...]  # names as in gpufleet.matrix.gpus (what nvidia-smi prints)
    gpu_count: int
    value: float | None
    unit: str
    source: Source | None
    batch_per_gpu: int | None = None
    xla: bool | None = None
    measured_on: str = ""
    note: str = ""

    def configuration(self) -> str:
        """The configuration the figure was measured in: step, precision, XLA, batch, host."""
        step, _, precision = self.figure.rpartition(".")
        if step == "nccl_tests":  # no precision: nccl-tests' own data type
            parts = [f"{_STEP_NAMES[step]} bus bandwidth"]
        else:
            parts = [f"{_STEP_NAMES.get(step, step)} {precision.upper()}"]
        if step not in _TRAINING:
            parts.append("XLA n/a (no TensorFlow graph)" if step == "nccl_tests" else _GEMM_XLA)
        elif self.xla is not None:
            parts.append("XLA on" if self.xla else "XLA off")
        else:
            parts.append("XLA not stated by the table")
        if self.batch_per_gpu:
            parts.append(f"batch {self.batch_per_gpu}/GPU")
        parts.append(f"{self.gpu_count} GPU" + ("s" if self.gpu_count > 1 else ""))
        if self.measured_on:
            parts.append(self.measured_on)
        return ", ".join(parts)


_STEP_NAMES = {
    "resnet50.images_per_s": "ResNet-50 v1.5 training",
    "bert_large.sequences_per_s": "BERT-Large pre-training (seq 128)",
    "gemm.fraction_of_peak": "dense GEMM",
    "nccl_tests": "nccl-tests all_reduce_perf",
}
_TRAINING = ("resnet50.images_per_s", "bert_large.sequences_per_s")
_GEMM_XLA = "XLA n/a (one matmul: cuBLAS with or without it)"


_RN50_A100 = Source(f"{DLE} {DLE_RN50}", "Training performance: NVIDIA DGX A100 (8x A100 40GB)")
_RN50_V100 = Source(f"{DLE} {DLE_RN50}", "Training performance: NVIDIA DGX-1 (8x V100 16G)")
_RN50_A100 = Source(_RN50_A100.where, _RN50_A100.heading, DLE_RN50_COMMIT)
_RN50_V100 = Source(_RN50_V100.where, _RN50_V100.heading, DLE_RN50_COMMIT)
_RN50_TIME = Source(
    f"{DLE} {DLE_RN50}", "Training time: NVIDIA DGX A100 (8x A100 40GB)", DLE_RN50_COMMIT
)
_BERT_A100 = Source(
    f"{DLE} {DLE_BERT}",
    "Pre-training training performance: Single-node on NVIDIA DGX A100 (8x A100 80GB)",
    DLE_BERT_COMMIT,
)
_BERT_V100 = Source(
    f"{DLE} {DLE_BERT}",
    "Pre-training training performance: Single-node on NVIDIA DGX-2 V100 (16x V100 32GB)",
    DLE_BERT_COMMIT,
)
_TF1 = "TensorFlow 20.06-tf1-py3 NGC container, Horovod, averaged over an ImageNet epoch"
# XLA: the tables were made with scripts/run_pretraining_lamb.sh, whose use_xla defaults to true
# (DLE TensorFlow2/LanguageModeling/BERT scripts/run_pretraining_lamb.sh@5b1dddc6 and
# run_pretraining_lamb_phase1.sh@8a6ae958: use_xla=${7:-"true"} -> --enable_xla); the rows
# give batch and accumulation, not the flag. DLE applies LAMB once per 32-2048 accumulated
# micro-batches, gpufleet once per step (about 1 % of an A100 step at 312 sequences).
_BERT = (
    "LAMB with the table's gradient accumulation, XLA by run_pretraining_lamb.sh's default, "
    "TensorFlow 21.02-py3 NGC container"
)

_SXM2_32 = "the 32GB SXM2 part has the same chip and clocks"
_DGX2 = "proxy: DGX-2's V100 SXM3 32GB runs at a higher power limit than SXM2"
_V100_32 = ("Tesla V100-SXM2-32GB",)
_RN = "resnet50.images_per_s"
_BL = "bert_large.sequences_per_s"


def _rate(
    figure: str,
    gpus: tuple[str, ...],
    count: int,
    total: float,
    src: Source,
    batch: int,
    on: str,
    note: str = "",
) -> Reference:
    """A DLE throughput row: ``total`` over ``count`` GPUs, recorded per GPU."""
    unit = "images/s" if figure.startswith("resnet50") else "sequences/s"
    xla = True  # ResNet-50 rows are "+ XLA"; BERT's ran the script's default (see _BERT)
    if count > 1:
        note = f"{total:g} {unit} over {count} GPUs" + (f"; {note}" if note else "")
    return Reference(figure, gpus, count, total / count, unit, src, batch, xla, on, note)


# Per-GPU throughput. DLE ResNet-50 v1.5 rows are all "+ XLA"; the batch is per GPU.
THROUGHPUT: tuple[Reference, ...] = (
    _rate(f"{_RN}.tf32", A100_SXM, 1, 909.0, _RN50_A100, 256, f"DGX A100 40GB; {_TF1}"),
    _rate(f"{_RN}.amp", A100_SXM, 1, 2375.0, _RN50_A100, 256, f"DGX A100 40GB; {_TF1}"),
    _rate(f"{_RN}.tf32", A100_SXM, 8, 7000.0, _RN50_A100, 256, f"DGX A100 NVSwitch; {_TF1}"),
    _rate(f"{_RN}.amp", A100_SXM, 8, 17400.0, _RN50_A100, 256, f"DGX A100 NVSwitch; {_TF1}"),
    _rate(
        f"{_RN}.fp32", V100_SXM2, 1, 412.0, _RN50_V100, 128, f"DGX-1 V100 16GB; {_TF1}", _SXM2_32
    ),
    _rate(
        f"{_RN}.amp", V100_SXM2, 1, 1270.0, _RN50_V100, 256, f"DGX-1 V100 16GB; {_TF1}", _SXM2_32
    ),
    _rate(f"{_RN}.fp32", V100_SXM2, 8, 3170.0, _RN50_V100, 128, f"DGX-1 cube-mesh; {_TF1}"),
    _rate(f"{_RN}.amp", V100_SXM2, 8, 9510.0, _RN50_V100, 256, f"DGX-1 cube-mesh; {_TF1}"),
    _rate(f"{_BL}.tf32", A100_80, 1, 282.98, _BERT_A100, 176, f"DGX A100 80GB; {_BERT}"),
    _rate(f"{_BL}.amp", A100_80, 1, 485.59, _BERT_A100, 312, f"DGX A100 80GB; {_BERT}"),
    _rate(f"{_BL}.tf32", A100_80, 8, 1944.77, _BERT_A100, 176, f"DGX A100 NVSwitch; {_BERT}"),
    _rate(f"{_BL}.amp", A100_80, 8, 3799.24, _BERT_A100, 312, f"DGX A100 NVSwitch; {_BERT}"),
    _rate(f"{_BL}.fp32", _V100_32, 1, 49.97, _BERT_V100, 32, f"DGX-2; {_BERT}", _DGX2),
    _rate(f"{_BL}.amp", _V100_32, 1, 206.5, _BERT_V100, 60, f"DGX-2; {_BERT}", _DGX2),
)

# Models with no published TensorFlow training figure in DLE: the throughput check reports
# its figure and relies on calibration (gpufleet.floors.calibration).
UNPUBLISHED_NOTES: dict[str, str] = {
    "Tesla V100-PCIE-16GB": "DLE publishes DGX (SXM) figures only; the PCIe part runs at 250 W",
    "Tesla V100-PCIE-32GB": "DLE publishes DGX (SXM) figures only; the PCIe part runs at 250 W",
    "Tesla V100S-PCIE-32GB": "no DLE TensorFlow training table for V100S",
    "Tesla T4": "DLE ResNet-50 (TF) has T4 inference tables only, no training table",
    "NVIDIA A10": "no DLE TensorFlow training table",
    "NVIDIA A10G": "no DLE TensorFlow training table (and no datasheet)",
    "NVIDIA A30": "no DLE TensorFlow training table",
    "NVIDIA A100-PCIE-40GB": "DLE publishes DGX A100 (SXM4) figures only",
    "NVIDIA A100 80GB PCIe": "DLE publishes DGX A100 (SXM4) figures only",
    "NVIDIA L4": "no DLE TensorFlow training table for Ada GPUs",
    "NVIDIA L40S": "no DLE TensorFlow training table for Ada GPUs",
    "NVIDIA H100 80GB HBM3": "DLE's TensorFlow READMEs stop before Hopper",
    "NVIDIA H100 PCIe": "DLE's TensorFlow READMEs stop before Hopper",
    "NVIDIA H100 NVL": "DLE's TensorFlow READMEs stop before Hopper",
    "NVIDIA H200": "DLE's TensorFlow READMEs stop before Hopper",
    "NVIDIA B200": "no TensorFlow training figure published for Blackwell",
}
UNPUBLISHED: tuple[Reference, ...] = tuple(
    Reference("resnet50.images_per_s", (name,), 1, None, "images/s", None, note=why)
    for name, why in UNPUBLISHED_NOTES.items()
)

# XLA gain on ResNet-50 from the time-to-train table (1 GPU): the same run without and with XLA.
XLA_GAIN: tuple[Reference, ...] = (
    Reference(
        "xla.speedup.amp",
        A100_40,
        1,
        19.5 / 18.0,
        "x",
        _RN50_TIME,
        256,
        True,
        "DGX A100 40GB",
        "~19.5 h without XLA vs ~18 h with it",
    ),
    Reference(
        "xla.speedup.tf32",
        A100_40,
        1,
        47.0 / 40.0,
        "x",
        _RN50_TIME,
        256,
        True,
        "DGX A100 40GB",
        "~47 h without XLA vs ~40 h with it",
    ),
)

# Measured GEMM throughput as a fraction of gpufleet.matrix.gpus' dense datasheet peak, as cited
# by the workload review (REVIEW, section "gemm" and "How I got the numbers").
# MAMF: the stored version read has A100 SXM 267.9, A100 PCIe 256.4, H100 SXM 792.1 (bf16,
# CUDA 12.1); the review quotes a later revision (271 / 794).
_MAMF = Source(
    "stas00/ml-engineering compute/accelerator/README.md",
    "Maximum Achievable Matmul FLOPS comparison table",
)
_FRYER = Source("huggingface/gpu-fryer#4", "H100 FP32 without tensor cores, about 51.5 TFLOP/s")
_TPT120 = Source("zzc0721/torch-performance-test-data#120", "L4, 8192^3 matmul")
_TPT140 = Source("zzc0721/torch-performance-test-data#140", "V100 SXM2, 8192^3 matmul")
_T4FORUM = Source("NVIDIA developer forum", "About GPU peak performance (T4 at its 70 W cap)")
_A100_PCIE = ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe")
_BF16 = "MAMF is measured in bf16; fp16 and bf16 tensor rates are equal on this model"


def _frac(
    precision: str, gpus: tuple[str, ...], tflops: float, peak: float, src: Source, note: str = ""
) -> Reference:
    """A measured GEMM rate (TFLOP/s) over the dense datasheet peak gpus.py records."""
    return Reference(
        f"gemm.fraction_of_peak.{precision}",
        gpus,
        1,
        tflops / peak,
        "fraction",
        src,
        note=f"{tflops} of {peak} TFLOP/s" + (f"; {note}" if note else ""),
    )


GEMM_MEASURED: tuple[Reference, ...] = (
    _frac("bf16", A100_SXM, 267.9, 312.0, _MAMF),
    _frac("fp16", A100_SXM, 267.9, 312.0, _MAMF, _BF16),
    _frac("bf16", _A100_PCIE, 256.4, 312.0, _MAMF),
    _frac("fp16", _A100_PCIE, 256.4, 312.0, _MAMF, _BF16),
    _frac("bf16", H100_SXM, 792.1, 989.5, _MAMF),
    _frac("fp16", H100_SXM, 792.1, 989.5, _MAMF, _BF16),
    _frac("fp32", H100_SXM, 51.5, 67.0, _FRYER),
    _frac("fp32", ("NVIDIA L4",), 10.7, 30.3, _TPT120),
    _frac("tf32", ("NVIDIA L4",), 25.7, 60.0, _TPT120),
    _frac("fp16", ("NVIDIA L4",), 53.8, 121.0, _TPT120),
    _frac("bf16", ("NVIDIA L4",), 59.4, 121.0, _TPT120),
    _frac("fp32", V100_SXM2, 14.4, 15.7, _TPT140),
    _frac("fp16", V100_SXM2, 97.4, 125.0, _TPT140),
    _frac("fp16", ("Tesla T4",), 24.0, 65.0, _T4FORUM),
)

# nccl-tests all_reduce_perf bus bandwidth on healthy single-node hosts (GB/s), as cited by
# the review (section "allreduce"); the TF-path floor is a fraction of these.
_NCCL149 = Source("NVIDIA/nccl-tests#149", "healthy 8x A100 80GB report about 200 GB/s")
_NCCL212 = Source("NVIDIA/nccl-tests#212", "8x H100: ring about 370 GB/s, NVLS about 480")
NCCL_TESTS: tuple[Reference, ...] = (
    Reference(
        "nccl_tests.busbw_gbps",
        A100_40 + A100_80,
        8,
        200.0,
        "GB/s",
        _NCCL149,
        measured_on="8 GPUs on NVSwitch",
    ),
    Reference(
        "nccl_tests.busbw_gbps",
        (*H100_SXM, "NVIDIA H200"),
        8,
        370.0,
        "GB/s",
        _NCCL212,
        measured_on="8 GPUs on NVSwitch",
        note="ring; NVLS reaches about 480",
    ),
)

# PCIe generation of each model's host link (NVIDIA datasheets); all are x16 cards. B200 is left
# out: its host link is not stated per GPU in the HGX datasheet gpus.py cites.
PCIE_GEN: dict[str, int] = {
    **dict.fromkeys(
        (
            "Tesla V100-SXM2-16GB",
            "Tesla V100-PCIE-16GB",
            "Tesla V100-SXM2-32GB",
            "Tesla V100-PCIE-32GB",
            "Tesla V100S-PCIE-32GB",
            "Tesla T4",
        ),
        3,
    ),
    **dict.fromkeys(
        (
            "NVIDIA A10",
            "NVIDIA A10G",
            "NVIDIA A30",
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-PCIE-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100 80GB PCIe",
            "NVIDIA L4",
            "NVIDIA L40S",
        ),
        4,
    ),
    **dict.fromkeys(
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200"), 5
    ),
}

# Cards that run under a low power cap (T4 70 W, L4 72 W, A10/A10G 150 W, A30 165 W, NVIDIA
# datasheets): their sustained GEMM sits far below the boost-clock datasheet peak.
POWER_CAPPED = ("Tesla T4", "NVIDIA L4", "NVIDIA A10", "NVIDIA A10G", "NVIDIA A30")

ALL: tuple[Reference, ...] = THROUGHPUT + UNPUBLISHED + XLA_GAIN + GEMM_MEASURED + NCCL_TESTS


def references_for(gpu_name: str, figure_prefix: str = "") -> list[Reference]:
    """Every row for one GPU model, e.g. ``references_for("Tesla T4")`` (an UNPUBLISHED row)."""
    return [r for r in ALL if gpu_name in r.gpus and r.figure.startswith(figure_prefix)]


def published(gpu_name: str, figure: str, gpu_count: int = 1) -> Reference | None:
    """The published row for (model, figure, count) with a value, or None."""
    for ref in ALL:
        same = gpu_name in ref.gpus and ref.figure == figure and ref.gpu_count == gpu_count
        if same and ref.value is not None:
            return ref
    return None
