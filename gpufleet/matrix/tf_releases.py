"""TensorFlow releases: Python range, the CUDA stack each was built with, its and-cuda wheels."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TFRelease:
    """One TensorFlow release and the CUDA stack its Linux wheels were built and tested with.

    ``wheels`` maps each ``nvidia-*-cu12`` wheel of the ``and-cuda`` extra to the exact version
    to pin: the extra's ``==`` pin up to 2.19, and for 2.20/2.21 (whose extra only gives lower
    bounds) the lower bound, which is the version the release was built with.

    Example: ``TF_RELEASES["2.21.0"].cuda == "12.5"``
    """

    version: str
    python_min: str
    python_max: str
    cuda: str
    cudnn: str
    nccl: str
    wheels: dict[str, str] = field(hash=False)
    cuda_arch: tuple[str, ...]
    # Upper bounds the extra itself declares (2.20+), e.g. {"nvidia-nccl-cu12": "<3.0"}.
    wheel_ranges: dict[str, str] = field(default_factory=dict, hash=False)


def _cuda_wheels(
    cublas: str,
    cupti: str,
    nvcc: str,
    nvrtc: str,
    runtime: str,
    cudnn: str,
    cufft: str,
    curand: str,
    cusolver: str,
    cusparse: str,
    nccl: str,
    nvjitlink: str,
) -> dict[str, str]:
    return {
        "nvidia-cublas-cu12": cublas,
        "nvidia-cuda-cupti-cu12": cupti,
        "nvidia-cuda-nvcc-cu12": nvcc,
        "nvidia-cuda-nvrtc-cu12": nvrtc,
        "nvidia-cuda-runtime-cu12": runtime,
        "nvidia-cudnn-cu12": cudnn,
        "nvidia-cufft-cu12": cufft,
        "nvidia-curand-cu12": curand,
        "nvidia-cusolver-cu12": cusolver,
        "nvidia-cusparse-cu12": cusparse,
        "nvidia-nccl-cu12": nccl,
        "nvidia-nvjitlink-cu12": nvjitlink,
    }


# Source of every wheel row below: the `Requires-Dist: ...; extra == 'and-cuda'` lines of each
# release's wheel METADATA on PyPI, recorded verbatim (with the wheel URL and how they were
# read) in tests/unit/matrix_data/tf_and_cuda_metadata.txt, which a unit test checks this
# table against. Same text as tensorflow/tools/pip_package/setup.py at each release tag.

# 2.15.1: exact pins (2.15.0's extra also pinned tensorrt-libs, gone from PyPI; 2.15.1 does not).
_WHEELS_2_15 = _cuda_wheels(
    cublas="12.2.5.6",
    cupti="12.2.142",
    nvcc="12.2.140",
    nvrtc="12.2.140",
    runtime="12.2.140",
    cudnn="8.9.4.25",
    cufft="11.0.8.103",
    curand="10.3.3.141",
    cusolver="11.5.2.141",
    cusparse="12.1.2.141",
    nccl="2.16.5",
    nvjitlink="12.2.140",
)

# 2.16.1, 2.16.2, 2.17.0, 2.17.1: identical exact pins.
_WHEELS_2_16 = _cuda_wheels(
    cublas="12.3.4.1",
    cupti="12.3.101",
    nvcc="12.3.107",
    nvrtc="12.3.107",
    runtime="12.3.101",
    cudnn="8.9.7.29",
    cufft="11.0.12.1",
    curand="10.3.4.107",
    cusolver="11.5.4.101",
    cusparse="12.2.0.103",
    nccl="2.19.3",
    nvjitlink="12.3.101",
)

# 2.18.0, 2.18.1: exact pins.
_WHEELS_2_18 = _cuda_wheels(
    cublas="12.5.3.2",
    cupti="12.5.82",
    nvcc="12.5.82",
    nvrtc="12.5.82",
    runtime="12.5.82",
    cudnn="9.3.0.75",
    cufft="11.2.3.61",
    curand="10.3.6.82",
    cusolver="11.6.3.83",
    cusparse="12.5.1.3",
    nccl="2.21.5",
    nvjitlink="12.5.82",
)

# 2.19.0, 2.19.1: as 2.18 except NCCL.
_WHEELS_2_19 = {**_WHEELS_2_18, "nvidia-nccl-cu12": "2.23.4"}

# 2.20.0: ranges `>=X,<next major`; the lower bounds (the 2.18 build's versions, NCCL 2.25.1)
# are what the release was built with, and what we pin. Unpinned, pip picks CUDA 12.9 wheels.
_WHEELS_2_20 = {**_WHEELS_2_18, "nvidia-nccl-cu12": "2.25.1"}
# 2.21.0: as 2.20 with NCCL >=2.27.7.
_WHEELS_2_21 = {**_WHEELS_2_18, "nvidia-nccl-cu12": "2.27.7"}

_RANGES_2_20 = {
    **{name: "<13.0" for name in _WHEELS_2_18},
    "nvidia-cudnn-cu12": "<10.0",
    "nvidia-cufft-cu12": "<12.0",
    "nvidia-curand-cu12": "<11.0",
    "nvidia-cusolver-cu12": "<12.0",
    "nvidia-nccl-cu12": "<3.0",
}

# CUDA code in the wheels: the compute capabilities of the official build (`.bazelrc`,
# `build:cuda_clang`). From 2.18 (hermetic CUDA 12.5.1): HERMETIC_CUDA_COMPUTE_CAPABILITIES=
# "sm_60,sm_70,sm_80,sm_89,compute_90" (tensorflow/tensorflow .bazelrc). Up to 2.17:
# TF_CUDA_COMPUTE_CAPABILITIES="sm_50,sm_60,sm_70,sm_80,compute_90", as copied from TF's
# .bazelrc by CUDA 12.3-era build scripts. So no release carries sm_90 SASS: Hopper and newer
# run the compute_90 PTX through the driver's JIT.
_ARCH_OLD = ("sm_50", "sm_60", "sm_70", "sm_80", "compute_90")
_ARCH_NEW = ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")


def _release(
    version: str, py: tuple[str, str], cuda: str, wheels: dict[str, str], **kw
) -> TFRelease:
    return TFRelease(
        version=version,
        python_min=py[0],
        python_max=py[1],
        cuda=cuda,
        cudnn=wheels["nvidia-cudnn-cu12"],
        nccl=wheels["nvidia-nccl-cu12"],
        wheels=wheels,
        **kw,
    )


# Python ranges: Requires-Python (the minimum) and the CPython tags of the wheels PyPI lists for
# each release (the maximum); both recorded in tests/unit/matrix_data/tf_and_cuda_metadata.txt.
TF_RELEASES: dict[str, TFRelease] = {
    r.version: r
    for r in (
        _release("2.15.1", ("3.9", "3.11"), "12.2", _WHEELS_2_15, cuda_arch=_ARCH_OLD),
        _release("2.16.1", ("3.9", "3.12"), "12.3", _WHEELS_2_16, cuda_arch=_ARCH_OLD),
        _release("2.16.2", ("3.9", "3.12"), "12.3", _WHEELS_2_16, cuda_arch=_ARCH_OLD),
        _release("2.17.0", ("3.9", "3.12"), "12.3", _WHEELS_2_16, cuda_arch=_ARCH_OLD),
        _release("2.17.1", ("3.9", "3.12"), "12.3", _WHEELS_2_16, cuda_arch=_ARCH_OLD),
        _release("2.18.0", ("3.9", "3.12"), "12.5", _WHEELS_2_18, cuda_arch=_ARCH_NEW),
        _release("2.18.1", ("3.9", "3.12"), "12.5", _WHEELS_2_18, cuda_arch=_ARCH_NEW),
        _release("2.19.0", ("3.9", "3.12"), "12.5", _WHEELS_2_19, cuda_arch=_ARCH_NEW),
        _release("2.19.1", ("3.9", "3.12"), "12.5", _WHEELS_2_19, cuda_arch=_ARCH_NEW),
        _release(
            "2.20.0",
            ("3.9", "3.13"),
            "12.5",
            _WHEELS_2_20,
            cuda_arch=_ARCH_NEW,
            wheel_ranges=_RANGES_2_20,
        ),
        _release(
            "2.21.0",
            ("3.10", "3.13"),
            "12.5",
            _WHEELS_2_21,
            cuda_arch=_ARCH_NEW,
            wheel_ranges=_RANGES_2_20,
        ),
    )
}
