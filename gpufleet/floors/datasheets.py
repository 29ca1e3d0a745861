"""Datasheet figures a healthy GPU shows in nvidia-smi: PCIe link, board power, board size."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.floors.references import PCIE_GEN

# Every data-centre card in gpus.py has a x16 host link (NVIDIA datasheets, "PCI Express Gen N
# x16" in each interface row).
PCIE_WIDTH = 16

# GPUs per host a board part (SXM) comes in: HGX/DGX baseboards carry 4 or 8 (DGX-2 and HGX-2:
# 16), and cloud VMs hand out 1, 2, 4 or 8 of a baseboard's GPUs. Any other count on an SXM host
# means a GPU is gone (NVIDIA HGX and DGX product pages; AWS p3/p4d/p5 and GCP a2/a3 shapes).
BOARD_COUNTS = (1, 2, 4, 8, 16)
# NVSwitch chips on an 8-GPU baseboard: HGX A100 carries 6, HGX H100/H200 4 (NVIDIA HGX A100
# and DGX H100 user guides). Any NVSwitch on the PCI bus means an 8-GPU board.
NVSWITCH_BOARD_GPUS = 8


@dataclass(frozen=True)
class Datasheet:
    """What NVIDIA publishes for one model and what nvidia-smi can be held to.

    ``power_w``: the board power the datasheet states (the low end where it gives a
    configurable range); ``boost_mhz``: the maximum boost clock where NVIDIA publishes one;
    ``board``: an SXM part, sold only on NVIDIA's baseboards.
    """

    model: str
    pcie_gen: int | None
    power_w: float | None
    boost_mhz: int | None
    board: bool
    source: str

    @property
    def pcie_width(self) -> int:
        return PCIE_WIDTH


_V100 = (
    "NVIDIA Tesla V100 datasheet (max power: SXM2 300 W, PCIe 250 W); Volta architecture "
    "whitepaper (SXM2 boost clock 1530 MHz)"
)
_V100S = "NVIDIA V100S datasheet"
_T4 = "NVIDIA T4 datasheet (max power 70 W); T4 product brief (boost clock 1590 MHz)"
_A100 = (
    "NVIDIA A100 datasheet (max TDP: SXM 400 W, 500 W with a custom thermal solution; PCIe "
    "40GB 250 W, 80GB 300 W); A100 architecture whitepaper (boost clock 1410 MHz)"
)
_ADA = "NVIDIA L4 / L40S datasheets (max power 72 W / 350 W)"
_H100 = "NVIDIA H100 datasheet (SXM up to 700 W, PCIe 300-350 W, NVL 350-400 W)"
_H200 = "NVIDIA H200 datasheet (SXM up to 700 W)"
_AMPERE_PCIE = "NVIDIA A10 / A30 datasheets (max power 150 W / 165 W)"

# (model, power W, boost MHz, board part, source)
_ROWS: tuple[tuple[str, float | None, int | None, bool, str], ...] = (
    ("Tesla V100-SXM2-16GB", 300.0, 1530, True, _V100),
    ("Tesla V100-SXM2-32GB", 300.0, 1530, True, _V100),
    ("Tesla V100-PCIE-16GB", 250.0, None, False, _V100),
    ("Tesla V100-PCIE-32GB", 250.0, None, False, _V100),
    ("Tesla V100S-PCIE-32GB", 250.0, None, False, _V100S),
    ("Tesla T4", 70.0, 1590, False, _T4),
    ("NVIDIA A10", 150.0, None, False, _AMPERE_PCIE),
    ("NVIDIA A10G", None, None, False, "AWS-only part: no NVIDIA datasheet"),
    ("NVIDIA A30", 165.0, None, False, _AMPERE_PCIE),
    ("NVIDIA A100-SXM4-40GB", 400.0, 1410, True, _A100),
    ("NVIDIA A100-SXM4-80GB", 400.0, 1410, True, _A100),
    ("NVIDIA A100-PCIE-40GB", 250.0, None, False, _A100),
    ("NVIDIA A100 80GB PCIe", 300.0, None, False, _A100),
    ("NVIDIA L4", 72.0, None, False, _ADA),
    ("NVIDIA L40S", 350.0, None, False, _ADA),
    ("NVIDIA H100 80GB HBM3", 700.0, None, True, _H100),
    ("NVIDIA H100 PCIe", 300.0, None, False, _H100),
    ("NVIDIA H100 NVL", 350.0, None, False, _H100),
    ("NVIDIA H200", 700.0, None, True, _H200),
)

DATASHEETS: dict[str, Datasheet] = {
    name: Datasheet(name, PCIE_GEN.get(name), power, boost, board, source)
    for name, power, boost, board, source in _ROWS
}


def datasheet(model: str | None) -> Datasheet | None:
    """The row for a model as nvidia-smi names it (any case), or None for one not tabled."""
    if not model:
        return None
    wanted = model.strip().lower()
    for name, row in DATASHEETS.items():
        if name.lower() == wanted:
            return row
    return None


def expected_gpu_count(model: str | None, seen: int, nvswitches: int = 0) -> int | None:
    """How many GPUs a host showing ``seen`` of this model should have, when the board says.

    Any NVSwitch on the bus: an 8-GPU baseboard. An SXM part: the smallest board count at or
    above ``seen`` (7 of 8 -> 8). A PCIe card, or a model not tabled: None (nothing to infer).

    Example: ``expected_gpu_count("NVIDIA A100-SXM4-80GB", 7) == 8``
    """
    if nvswitches > 0:
        return max(NVSWITCH_BOARD_GPUS, seen)
    row = datasheet(model)
    if row is None or not row.board or seen < 1:
        return None
    return next((n for n in BOARD_COUNTS if n >= seen), seen)


# Interconnect each SXM board gives a healthy host of 4 or 8 GPUs (review 2 N14): DGX-1V's eight
# V100-SXM2 sit in a hybrid cube-mesh (some pairs over PCIe: nvlink_partial); four V100-SXM2
# (DGX Station) and HGX A100/H100/H200 boards link every pair, directly or through NVSwitch,
# which nvidia-smi topo -m shows as NV# ("nvlink").
LINK_RANK = {
    "cross_socket": 0,
    "pcie_host_bridge": 1,
    "pcie_switch": 2,
    "nvlink_partial": 3,
    "nvlink": 4,
    "nvswitch": 4,
}


def expected_interconnect(model: str | None, count: int) -> str | None:
    """The class a healthy host of ``count`` GPUs of this SXM model shows, or None."""
    row = datasheet(model)
    if row is None or not row.board or count not in (4, 8):
        return None
    return "nvlink_partial" if row.model.startswith("Tesla V100") and count == 8 else "nvlink"


def below_expected(model: str | None, count: int, measured: str) -> str | None:
    """The expected class when the measured one is slower (NVLinks down), else None."""
    expected = expected_interconnect(model, count)
    if expected is None or measured not in LINK_RANK:
        return None
    return expected if LINK_RANK[measured] < LINK_RANK[expected] else None
