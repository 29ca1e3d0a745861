"""ResNet-50 v1.5 training throughput per GPU (synthetic data, NHWC) against DLE's published figure.

Run: ``python -m validation.workloads.resnet50 [--quick] [--json PATH]``

The step is DLE's: 224x224x3 images, 1000 classes, SGD with momentum, the per-GPU batch DLE
used for this GPU model and precision, XLA on. Figures: ``resnet50.images_per_s.<tf32|fp32|amp>``
per GPU, judged against gpufleet.floors.derived (a published figure x a margin, or calibration).
"""

from __future__ import annotations

from validation.workloads import _throughput
from validation.workloads._common import Run, main


def body(run: Run) -> None:
    _throughput.body(run, "resnet50")


if __name__ == "__main__":
    raise SystemExit(main("resnet50", body, description=__doc__.splitlines()[0]))
