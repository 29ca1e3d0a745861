"""Speed-up floors (mixed precision, XLA) from published pairs measured in the workload's setup."""

from __future__ import annotations

from gpufleet.floors import references as refs
from gpufleet.floors.floor_types import Floor
from gpufleet.matrix.gpus import GpuModel

# A speed-up is a ratio of two figures taken on the same host in the same run: their spreads
# partly cancel, but Keras 3 pays casts and loss scaling that TF1's AMP graph rewrite fused.
SPEEDUP_MARGIN = 0.75
# What the mixed_precision workload measures (validation/workloads/mixed_precision.py): the
# configuration a published pair must share for its ratio to become the floor.
MEASURED = (
    "ResNet-50 v1.5 training, both arms XLA on, each arm at DLE's batch for its precision, "
    "equal images per timed block, 1 GPU; gpufleet: Keras 3, synthetic batch on the device"
)


def float_precision(model: GpuModel) -> str:
    """What TF's float32 runs as: TF32 on tensor cores from compute capability 8.0 (TF default)."""
    return "tf32" if model.compute_capability >= (8, 0) else "fp32"


def _pair(model: GpuModel, base: str) -> tuple[refs.Reference, refs.Reference] | None:
    """DLE's AMP and float rows for this model, both with XLA (the workload's configuration)."""
    amp = refs.published(model.name, "resnet50.images_per_s.amp")
    flt = refs.published(model.name, f"resnet50.images_per_s.{base}")
    if amp is None or flt is None or not (amp.value and flt.value):
        return None
    if not (amp.xla and flt.xla):
        return None
    return amp, flt


def _unmeasured(name: str, why: str) -> Floor:
    origin = (
        f"no published figure in the workload's configuration ({why}): reported; set by calibration"
    )
    return Floor(name, None, "x", origin, config=MEASURED)


def mixed_precision(model: GpuModel) -> list[Floor]:
    """``mixed_precision.speedup.fp16`` (and ``.bf16``) where the model has the tensor cores."""
    name = "mixed_precision.speedup.fp16"
    if not model.fp16_tensor_cores:
        return [Floor(name, None, "x", "no tensor cores: not judged")]
    base = float_precision(model)
    pair = _pair(model, base)
    out = []
    if pair is None:
        why = refs.UNPUBLISHED_NOTES.get(model.name, "DLE publishes no AMP/float pair with XLA")
        out.append(_unmeasured(name, why))
    else:
        amp, flt = pair
        ratio = amp.value / flt.value  # type: ignore[operator]
        figure = (
            f"AMP {amp.value:.4g} / {base.upper()} {flt.value:.4g} images/s = {ratio:.2f} "
            f"(AMP batch {amp.batch_per_gpu}, {base.upper()} batch {flt.batch_per_gpu}, "
            "XLA on both)"
        )
        why = "Keras 3 casts and loss scaling"
        origin = f"published ({amp.source}: {figure}) x {SPEEDUP_MARGIN} ({why})"
        config = f"{MEASURED}; DLE: {amp.measured_on}"
        value = round(ratio * SPEEDUP_MARGIN, 2)
        out.append(
            Floor(name, value, "x", origin, figure=figure, config=config, source=str(amp.source))
        )
    if model.bf16_tensor_cores:
        out.append(
            _unmeasured("mixed_precision.speedup.bf16", "DLE's TensorFlow tables have no bf16 rows")
        )
    return out


def xla(model: GpuModel) -> list[Floor]:
    """``xla.speedup.*``: reported only. DLE's time-to-train gain compares TF1 graphs with cuDNN's
    fused batch norm; the workload's plain arm is a Keras 3 step with an unfused float32 batch norm
    (review 2, section 2.2), a configuration nothing publishes."""
    gain = ", ".join(f"{r.figure} {r.value:.2f}" for r in refs.XLA_GAIN if r.value)
    why = (
        f"DLE's gains ({gain}, {refs.DLE} {refs.DLE_RN50} time-to-train table) compare TF1 graphs "
        "with a fused batch norm, not Keras 3's unfused one"
    )
    config = "ResNet-50 v1.5 training, plain arm XLA off vs XLA on, same precision and batch, 1 GPU"
    return [
        Floor(
            f"xla.speedup.{float_precision(model)}", None, "x", f"not judged: {why}", config=config
        ),
        Floor("xla.speedup.amp", None, "x", f"not judged: {why}", config=config),
    ]
