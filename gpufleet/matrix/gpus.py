"""Data-centre NVIDIA GPUs by PCI device id: architecture, compute capability, peak TFLOPS."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuModel:
    """One GPU (or NVSwitch bridge) model as it appears on the PCI bus.

    ``open_modules``: whether NVIDIA's open kernel modules drive it ("unsupported" before
    Turing, "required" on Blackwell and Grace Hopper, else "supported"). ``peak_tflops``:
    dense (no sparsity) datasheet figures; a precision is absent when the tensor cores lack it.
    ``min_driver_branch`` / ``max_driver_branch``: the driver branches that support the model.
    ``nvlink5_fabric``: the model only ships on NVLink 5 baseboards (HGX/DGX B200), whose NVLink
    switches are not on the host's PCI bus but still need Fabric Manager and NVLSM.

    Example: ``GPUS["2330"].compute_capability == (9, 0)``
    """

    device_id: str
    name: str
    architecture: str
    compute_capability: tuple[int, int]
    open_modules: str
    fp16_tensor_cores: bool
    bf16_tensor_cores: bool
    peak_tflops: dict[str, float] = field(hash=False)
    memory_gib: int
    is_nvswitch: bool = False
    min_driver_branch: int = 0
    max_driver_branch: int | None = None
    datasheet: str = ""  # where peak_tflops comes from
    nvlink5_fabric: bool = False


# Dense peak TFLOPS per precision, and the datasheet each comes from. Datasheets print
# tensor-core figures "with sparsity" (twice the dense rate); the halved figure is recorded.
Peak = tuple[dict[str, float], str]
_V100_SXM2: Peak = ({"fp32": 15.7, "fp16": 125.0}, "NVIDIA Tesla V100 datasheet, SXM2")
_V100_PCIE: Peak = ({"fp32": 14.0, "fp16": 112.0}, "NVIDIA Tesla V100 datasheet, PCIe")
_V100S: Peak = ({"fp32": 16.4, "fp16": 130.0}, "NVIDIA V100S datasheet, PCIe")
_T4: Peak = ({"fp32": 8.1, "fp16": 65.0}, "NVIDIA T4 datasheet (mixed precision FP16/FP32)")
_A10: Peak = (
    {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0},
    "NVIDIA A10 datasheet",
)
_A30: Peak = ({"fp32": 10.3, "tf32": 82.0, "fp16": 165.0, "bf16": 165.0}, "NVIDIA A30 datasheet")
_A100: Peak = (
    {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
    "NVIDIA A100 Tensor Core GPU datasheet",
)
_L4: Peak = ({"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0}, "NVIDIA L4 datasheet")
_L40S: Peak = (
    {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05},
    "NVIDIA L40S datasheet",
)
_H100_SXM: Peak = (
    {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5},
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM",
)
_H100_PCIE: Peak = (
    {"fp32": 51.0, "tf32": 378.0, "fp16": 756.5, "bf16": 756.5},
    "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe",
)
_H100_NVL: Peak = (
    {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5},
    "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL (per GPU)",
)
_H200: Peak = (
    {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5},
    "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM",
)
# HGX B200 (8 GPUs): FP32 600 TF, TF32 18 PF, FP16/BF16 36 PF with sparsity; per GPU and dense.
_B200: Peak = (
    {"fp32": 75.0, "tf32": 1125.0, "fp16": 2250.0, "bf16": 2250.0},
    "NVIDIA HGX B200 datasheet, divided by 8 GPUs",
)
_NO_DATASHEET: Peak = ({}, "")

_VOLTA = {"architecture": "Volta", "compute_capability": (7, 0), "open_modules": "unsupported"}
_AMPERE80 = {"architecture": "Ampere", "compute_capability": (8, 0), "open_modules": "supported"}
_AMPERE86 = {"architecture": "Ampere", "compute_capability": (8, 6), "open_modules": "supported"}
_ADA = {"architecture": "Ada Lovelace", "compute_capability": (8, 9), "open_modules": "supported"}
_HOPPER = {"architecture": "Hopper", "compute_capability": (9, 0), "open_modules": "supported"}


def _gpu(device_id: str, name: str, peak: Peak, memory_gib: int, **kw) -> GpuModel:
    cc = kw["compute_capability"]
    return GpuModel(
        device_id=device_id,
        name=name,
        peak_tflops=peak[0],
        datasheet=peak[1],
        memory_gib=memory_gib,
        fp16_tensor_cores=cc >= (7, 0),
        bf16_tensor_cores=cc >= (8, 0),
        **kw,
    )


# PCI device ids and names: the pci.ids database. Debian 12's pci.ids (version 2023.04.10,
# /usr/share/misc/pci.ids) lists 1db1 "GV100GL [Tesla V100 SXM2 16GB]", 1db4, 1db5, 1db6, 1df6,
# 1eb8 "TU104GL [Tesla T4]", 2236 "GA102GL [A10]", 2237 "GA102GL [A10G]", 20b7 "GA100GL [A30
# PCIe]", 20b0/20f1/20b2/20b5 (A100 SXM4 40GB / PCIe 40GB / SXM4 80GB / PCIe 80GB), 27b8
# "AD104GL [L4]", 2330 "GH100[H100 SXM5 80GB]", 2331 "GH100 [H100 PCIe]" and 1af1 "GA100 [A100
# NVSwitch]". Newer pci.ids entries, as quoted in public code: 26b9 "AD102GL [L40S]", 2321
# "GH100 [H100L 94GB]" (the H100 NVL), 2335 "GH100 [H200 SXM 141GB]", 2901 "GB100 [B200]",
# 22a3 "GH100 [H100 NVSwitch]". Names below are what nvidia-smi prints, not the pci.ids names.
# Open modules: Turing and newer only; the proprietary flavour is required for Maxwell, Pascal
# and Volta (NVIDIA driver installation guide, "Kernel Modules"); Blackwell needs the open
# modules (DESIGN.md). R580 is the last branch for Volta. B200 (compute capability 10.0) needs
# CUDA >= 12.8, so driver branch >= 570.
_MODELS = (
    _gpu("1db1", "Tesla V100-SXM2-16GB", _V100_SXM2, 16, max_driver_branch=580, **_VOLTA),
    _gpu("1db4", "Tesla V100-PCIE-16GB", _V100_PCIE, 16, max_driver_branch=580, **_VOLTA),
    _gpu("1db5", "Tesla V100-SXM2-32GB", _V100_SXM2, 32, max_driver_branch=580, **_VOLTA),
    _gpu("1db6", "Tesla V100-PCIE-32GB", _V100_PCIE, 32, max_driver_branch=580, **_VOLTA),
    _gpu("1df6", "Tesla V100S-PCIE-32GB", _V100S, 32, max_driver_branch=580, **_VOLTA),
    _gpu(
        "1eb8",
        "Tesla T4",
        _T4,
        16,
        architecture="Turing",
        compute_capability=(7, 5),
        open_modules="supported",
    ),
    _gpu("2236", "NVIDIA A10", _A10, 24, **_AMPERE86),
    # A10G: an AWS-only variant of the A10; NVIDIA publishes no datasheet for it, so no
    # peak figures are recorded (validation falls back to relative checks).
    _gpu("2237", "NVIDIA A10G", _NO_DATASHEET, 24, **_AMPERE86),
    _gpu("20b7", "NVIDIA A30", _A30, 24, **_AMPERE80),
    _gpu("20b0", "NVIDIA A100-SXM4-40GB", _A100, 40, **_AMPERE80),
    _gpu("20f1", "NVIDIA A100-PCIE-40GB", _A100, 40, **_AMPERE80),
    _gpu("20b2", "NVIDIA A100-SXM4-80GB", _A100, 80, **_AMPERE80),
    _gpu("20b5", "NVIDIA A100 80GB PCIe", _A100, 80, **_AMPERE80),
    _gpu("27b8", "NVIDIA L4", _L4, 24, **_ADA),
    _gpu("26b9", "NVIDIA L40S", _L40S, 48, **_ADA),
    _gpu("2330", "NVIDIA H100 80GB HBM3", _H100_SXM, 80, **_HOPPER),
    _gpu("2331", "NVIDIA H100 PCIe", _H100_PCIE, 80, **_HOPPER),
    _gpu("2321", "NVIDIA H100 NVL", _H100_NVL, 94, **_HOPPER),
    _gpu("2335", "NVIDIA H200", _H200, 141, **_HOPPER),
    _gpu(
        "2901",
        "NVIDIA B200",
        _B200,
        180,
        architecture="Blackwell",
        compute_capability=(10, 0),
        open_modules="required",
        min_driver_branch=570,
        # B200 ships as an SXM module on HGX/DGX B200 boards only; there "the FabricManager
        # package needs an additional NVLSM dependency" (Fabric Manager user guide, quoted in
        # siderolabs/extensions#717): gpufleet/matrix/record/SOURCES.md, fm-guide-nvlsm.
        nvlink5_fabric=True,
    ),
    # Grace superchips (arm64 hosts only; with require_cuda_build the matrix refuses them, as
    # PyPI's aarch64 TensorFlow has no CUDA). Ids: NVIDIA/gpu-admin-tools gpu/devid_names.py
    # at v2025.10.20 (0x2342/0x2343/0x2345/0x2348 GH200, 0x2941 GB200; devid_properties.py:
    # has_c2c, is_sxm). Names and memory as nvidia-smi prints them, quoted in public code:
    # "NVIDIA GH200 480GB ... 97871MiB" (drivers 535 to 580), "NVIDIA GB200 ... 189471MiB"
    # (580 to 595). "For cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA
    # Blackwell, you must use the open-source GPU kernel modules" (NVIDIA technical blog,
    # "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules", 2024). No datasheet
    # figures recorded (unverified): validation falls back to relative checks. Device-id
    # tables quoted in public code name 0x2342 "GH200 120GB/480GB": nvidia-smi's "NVIDIA GH200
    # 120GB" (the 120 GB LPDDR5X build) is likely the same id, which name lookups miss;
    # 0x2343, 0x2345 and 0x2348 have no quoted nvidia-smi name and stay out. GB200 NVL
    # compute trays also need NVIDIA's IMEX (nvidia-imex, gpu-driver-container's
    # imex_install), which gpufleet does not install: unverified, not modelled here.
    _gpu(
        "2342",
        "NVIDIA GH200 480GB",
        _NO_DATASHEET,
        96,
        **{**_HOPPER, "open_modules": "required"},
    ),
    _gpu(
        "2941",
        "NVIDIA GB200",
        _NO_DATASHEET,
        185,
        architecture="Blackwell",
        compute_capability=(10, 0),
        open_modules="required",
        min_driver_branch=570,
    ),
)

# NVSwitch bridges show up on the PCI bus of HGX A100/H100/H200 boards; their presence means
# Fabric Manager. (HGX B200's NVLink switches are not on the host's PCI bus: its GPU id says
# it, ``GpuModel.nvlink5_fabric``.)
_NVSWITCHES = (
    GpuModel(
        device_id="1af1",
        name="GA100 NVSwitch (HGX A100)",
        architecture="Ampere",
        compute_capability=(0, 0),
        open_modules="supported",
        fp16_tensor_cores=False,
        bf16_tensor_cores=False,
        peak_tflops={},
        memory_gib=0,
        is_nvswitch=True,
    ),
    GpuModel(
        device_id="22a3",
        name="GH100 NVSwitch (HGX H100/H200)",
        architecture="Hopper",
        compute_capability=(0, 0),
        open_modules="supported",
        fp16_tensor_cores=False,
        bf16_tensor_cores=False,
        peak_tflops={},
        memory_gib=0,
        is_nvswitch=True,
    ),
)

GPUS: dict[str, GpuModel] = {m.device_id: m for m in (*_MODELS, *_NVSWITCHES)}


def gpu_by_device_id(device_id: str) -> GpuModel | None:
    """Look a PCI device id up, e.g. ``gpu_by_device_id("2330").name == "NVIDIA H100 80GB HBM3"``.

    Accepts "2330", "0x2330" or "10de:2330", in any case.
    """
    key = device_id.strip().lower()
    key = key.removeprefix("10de:").removeprefix("0x")
    return GPUS.get(key)
