"""The truth table: each class's floors and the review's predicted healthy figures, sourced."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.floors.derived import Floor, floors_for
from gpufleet.matrix.gpus import GPUS
from validation.workloads._batch import figure_mismatch, fitting_batch
from validation.workloads._refsteps import batch_per_gpu

REVIEW = "workload-gpu-review-2.md"
R21 = f"{REVIEW} §2.1"


@dataclass(frozen=True)
class Kind:
    """One class of host: what ``floors_for`` is asked for, and floors.md's column head."""

    model: str
    count: int
    interconnect: str
    title: str


CLASSES: dict[str, Kind] = {
    "8xV100": Kind("Tesla V100-SXM2-16GB", 8, "nvlink_partial", "8x V100 SXM2 (nvlink_partial)"),
    "8xA100": Kind("NVIDIA A100-SXM4-80GB", 8, "nvswitch", "8x A100 SXM4 (nvswitch)"),
    "8xH100": Kind("NVIDIA H100 80GB HBM3", 8, "nvswitch", "8x H100 SXM (nvswitch)"),
    "1xL4": Kind("NVIDIA L4", 1, "single_gpu", "1x L4"),
    "2xT4": Kind("Tesla T4", 2, "pcie_host_bridge", "2x T4 (pcie_host_bridge)"),
    "8xL40S": Kind("NVIDIA L40S", 8, "cross_socket", "8x L40S (cross_socket)"),
}

# Predicted healthy figure per class: (low, high) of the review's range, in the floor's unit.
# GEMM rows are TFLOP/s (the review's unit); the test divides by the datasheet peak for the
# fraction. The truth is the middle of each range; the low end is checked too, except where
# the review itself calls the check marginal or unproven (MARGINAL below).
Range = tuple[float, float]
PREDICTED: dict[str, dict[str, Range]] = {
    # §2.2: a Keras 3 ResNet-50 with XLA at 0.80-1.0 x DLE.
    "resnet50.images_per_s.fp32": {"8xV100": (330, 410)},
    "resnet50.images_per_s.tf32": {"8xA100": (700, 900)},
    "resnet50.images_per_s.amp": {"8xV100": (950, 1250), "8xA100": (1900, 2400)},
    "bert_large.sequences_per_s.tf32": {"8xA100": (200, 270)},
    "bert_large.sequences_per_s.amp": {"8xA100": (340, 460)},
    # Both arms with XLA (issue 32 item 1, N1): the AMP/float ratio of the §2.2 ranges above,
    # low = low AMP over high float.
    "mixed_precision.speedup.fp16": {
        "8xV100": (950 / 410, 1250 / 330),
        "8xA100": (1900 / 900, 2400 / 700),
    },
    "mirrored.scaling_efficiency": {
        "8xV100": (0.97, 0.99),
        "8xA100": (0.97, 0.99),
        "8xH100": (0.95, 0.99),
        "2xT4": (0.98, 0.98),
        "8xL40S": (0.95, 0.98),
    },
    "gemm.tflops.fp32": {
        "8xV100": (13.5, 14.4),
        "8xA100": (18.5, 19.0),
        "8xH100": (50.0, 51.5),
        "1xL4": (9.5, 10.7),
        "2xT4": (4.0, 5.0),
        "8xL40S": (55.0, 70.0),
    },
    "gemm.tflops.tf32": {
        "8xA100": (130, 150),
        "8xH100": (370, 370),
        "1xL4": (23.0, 25.7),
        "8xL40S": (120, 150),
    },
    "gemm.tflops.fp16": {
        "8xV100": (88, 100),
        "8xA100": (235, 260),
        "8xH100": (700, 730),
        "1xL4": (48, 54),
        "2xT4": (20, 26),
        "8xL40S": (220, 280),
    },
    "gemm.tflops.bf16": {
        "8xA100": (235, 260),
        "8xH100": (700, 730),
        "1xL4": (52, 59),
        "8xL40S": (220, 280),
    },
    "allreduce.busbw_gbps": {
        "8xV100": (100, 140),
        "8xA100": (200, 230),
        "8xH100": (340, 460),
        "2xT4": (5, 11),
        "8xL40S": (8, 20),
    },
    "allreduce.busbw_fraction_of_nccl_tests": {
        "8xV100": (0.9, 0.9),
        "8xA100": (0.9, 0.9),
        "8xH100": (0.75, 0.95),
        "2xT4": (0.95, 0.95),
        "8xL40S": (0.95, 0.95),
    },
    # After N4's fix every arm pays the same overlapped copy (prefetch_to_device) and the same
    # iterator cost, so the ratio is S / max(S, P / cores): 1.0 when the tuned pipeline keeps
    # up, less the jitter of its threads; the shortest step (H100, 1.25 ms) feels it most.
    "input_pipeline.device_busy_fraction": {
        "8xV100": (0.93, 0.99),
        "8xA100": (0.93, 0.99),
        "8xH100": (0.90, 0.98),
        "1xL4": (0.93, 0.99),
        "2xT4": (0.93, 0.99),
        "8xL40S": (0.93, 0.99),
    },
}
# §2.1 marks every_gpu_busy ✓ without a figure: each GPU at 95 %, spread 0, is assumed.
BUSY_PCT = 95.0
SOURCES = {
    "resnet50": f"{REVIEW} §2.2 (Keras 3 with XLA at 0.80-1.0 x DLE)",
    "bert_large": R21,
    "mixed_precision": f"{REVIEW} §2.2 ranges, AMP over float with XLA in both arms",
    "mirrored": f"{R21} and §2.4",
    "gemm": f"{R21} (sustained TFLOP/s per precision) over the datasheet peak (gpus.py)",
    "allreduce": f"{R21} (TF path at 1 GiB)",
    "input_pipeline": f"{REVIEW} §2.5 step times with N4's fix (every arm copies alike); "
    "derived, not measured: validation.workloads.probe records it",
    "pcie": "the datasheet (gpufleet.floors.datasheets): a healthy card trains its full link",
}

# (class, figure): the review's own verdict is "?" or "marginal" at the low end of its range,
# so only the middle of the range is held to the floor.
MARGINAL = {
    ("8xA100", "resnet50.images_per_s.tf32"),
    ("8xV100", "resnet50.images_per_s.amp"),
    ("8xA100", "bert_large.sequences_per_s.tf32"),
    ("8xA100", "bert_large.sequences_per_s.amp"),
    ("8xV100", "mixed_precision.speedup.fp16"),
    ("2xT4", "gemm.tflops.fp16"),
    ("2xT4", "gemm.fraction_of_peak.fp16"),
    ("8xH100", "allreduce.busbw_fraction_of_nccl_tests"),
}
# Report-only checks (floor None: no published figure in the configuration the check measures;
# the figure is reported until calibration sets a floor).
_NO_DLE = (
    "resnet50.images_per_s.{f}",
    "resnet50.images_per_s.amp",
    "bert_large.sequences_per_s.{f}",
    "bert_large.sequences_per_s.amp",
    "mixed_precision.speedup.fp16",
)
_XLA = ("xla.speedup.{f}", "xla.speedup.amp")
REPORT_ONLY: dict[str, set[str]] = {
    "8xV100": {
        "bert_large.sequences_per_s.fp32",
        "bert_large.sequences_per_s.amp",
        *(n.format(f="fp32") for n in _XLA),
    },
    "8xA100": {"mixed_precision.speedup.bf16", *(n.format(f="tf32") for n in _XLA)},
    "8xH100": {*(n.format(f="tf32") for n in _NO_DLE + _XLA), "mixed_precision.speedup.bf16"},
    "1xL4": {*(n.format(f="tf32") for n in _NO_DLE + _XLA), "mixed_precision.speedup.bf16"},
    "2xT4": {n.format(f="fp32") for n in _NO_DLE + _XLA},
    "8xL40S": {*(n.format(f="tf32") for n in _NO_DLE + _XLA), "mixed_precision.speedup.bf16"},
}


# (class, figure): a set floor the suite does not apply on this class, because the batch that
# fits the GPU's memory is not the published figure's (validation.workloads._batch, review 2
# N7): mirrored's XLA-off ResNet-50 AMP at 256 per replica needs ~17 GB, so a 16 GB V100 runs
# 128 and DLE's weak scaling at 256 is reported, not judged.
NOT_AT_BATCH = {("8xV100", "mirrored.scaling_efficiency")}
# The step, precisions and XLA each batch-bound figure is measured with in the suite.
_MEASURED = {
    "resnet50.images_per_s.": ("resnet50", True),
    "bert_large.sequences_per_s.": ("bert_large", True),
    "mixed_precision.speedup.fp16": ("resnet50", True),
    "mirrored.scaling_efficiency": ("resnet50", False),
}


def suite_batch_skip(name: str, figure: str) -> str | None:
    """Why the suite, at this class's datasheet memory, does not apply ``figure``'s floor
    (the batch that fits is not the published figure's), or None."""
    kind = CLASSES[name]
    gpu = next(m for m in GPUS.values() if m.name == kind.model)
    memory = gpu.memory_gib * 1024 if gpu.memory_gib else None
    for prefix, (step, xla) in _MEASURED.items():
        if not figure.startswith(prefix):
            continue
        last = figure.rsplit(".", 1)[1]
        if figure.startswith("mirrored."):
            precisions = ["amp"]
        elif figure.startswith("mixed_precision."):
            precisions = [float_name(name), "amp"]
        else:
            precisions = [last]
        for precision in precisions:
            preferred = batch_per_gpu(step, precision, kind.model)
            batch = fitting_batch(step, precision, preferred, memory, xla=xla)
            why = figure_mismatch(kind.model, step, precision, batch)
            if why is not None:
                return why
    return None


def floors(name: str) -> dict[str, Floor]:
    """The floors of one class by name."""
    kind = CLASSES[name]
    return {f.name: f for f in floors_for(kind.model, kind.count, kind.interconnect)}


def peak(name: str, precision: str) -> float:
    model = next(m for m in GPUS.values() if m.name == CLASSES[name].model)
    return model.peak_tflops[precision]


def predicted(name: str, figure: str) -> Range | None:
    """The predicted range of ``figure`` on class ``name`` in the floor's unit, or None."""
    if figure.startswith("gemm.fraction_of_peak."):
        precision = figure.rsplit(".", 1)[1]
        tflops = PREDICTED.get(f"gemm.tflops.{precision}", {}).get(name)
        if tflops is None:
            return None
        top = peak(name, precision)
        return tflops[0] / top, tflops[1] / top
    return PREDICTED.get(figure, {}).get(name)


def source(figure: str) -> str:
    return SOURCES[figure.split(".")[0]]


# floors.md's per-class table: (row label, figure; "{f}" is the class's float precision).
README_ROWS = (
    ("`resnet50.images_per_s.{fp32,tf32}` per GPU", "resnet50.images_per_s.{f}"),
    ("`resnet50.images_per_s.amp` per GPU", "resnet50.images_per_s.amp"),
    ("`bert_large.sequences_per_s.amp`", "bert_large.sequences_per_s.amp"),
    ("`mixed_precision.speedup.fp16` (XLA both arms)", "mixed_precision.speedup.fp16"),
    ("`mixed_precision.speedup.bf16`", "mixed_precision.speedup.bf16"),
    ("`xla.speedup.amp`", "xla.speedup.amp"),
    ("`mirrored.scaling_efficiency`", "mirrored.scaling_efficiency"),
    ("`gemm.fraction_of_peak.fp32` each GPU", "gemm.fraction_of_peak.fp32"),
    ("`gemm.fraction_of_peak.fp16` each GPU", "gemm.fraction_of_peak.fp16"),
    ("`allreduce.busbw_gbps` (TF path, 1 GiB)", "allreduce.busbw_gbps"),
    ("`allreduce.busbw_fraction_of_nccl_tests`", "allreduce.busbw_fraction_of_nccl_tests"),
    ("`input_pipeline.device_busy_fraction`", "input_pipeline.device_busy_fraction"),
    ("`pcie.link_gen` each GPU", "pcie.link_gen"),
)


def float_name(name: str) -> str:
    return "tf32" if "resnet50.images_per_s.tf32" in floors(name) else "fp32"


def _shown(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def _range(low: float, high: float) -> str:
    return _shown(low) if _shown(low) == _shown(high) else f"{_shown(low)}-{_shown(high)}"


def cell(name: str, figure: str) -> str:
    """One cell of the floors.md table: the floor (or "report", or "n/a") and the predicted
    healthy range."""
    figure = figure.format(f=float_name(name))
    floor = floors(name).get(figure)
    if floor is None:
        return "n/a"
    value = floor.value
    text = "report" if value is None else f">= {value:g}"
    if value is not None and suite_batch_skip(name, figure):
        text += " (reported: batch by memory)"
    if figure.startswith("pcie."):
        return f"{text} [datasheet]"
    span = predicted(name, figure)
    if span is not None:
        text += f" [{_range(*span)}]"
    if (name, figure) in MARGINAL:
        text += " marginal"
    return text


def readme_table() -> str:
    """The table docs/reference/floors.md carries; test_truth_table.py checks they agree."""
    head = "| check | " + " | ".join(k.title for k in CLASSES.values()) + " |"
    rule = "|---" * (len(CLASSES) + 1) + "|"
    rows = [
        f"| {label} | " + " | ".join(cell(n, figure) for n in CLASSES) + " |"
        for label, figure in README_ROWS
    ]
    return "\n".join([head, rule, *rows])
