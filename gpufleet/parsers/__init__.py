"""Pure parsers over the output of host commands (nvidia-smi, lspci, dkms, ...); no I/O."""

from gpufleet.parsers.dcgm import parse_dcgm_diag
from gpufleet.parsers.diagnosis import diagnose
from gpufleet.parsers.nccl import parse_nccl_tests
from gpufleet.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_xml
from gpufleet.parsers.pci import parse_lspci
from gpufleet.parsers.system import (
    parse_dkms_status,
    parse_driver_version,
    parse_mokutil_sb_state,
    parse_nvcc_version,
)
from gpufleet.parsers.topo import parse_nvidia_smi_topo

__all__ = [
    "diagnose",
    "parse_dcgm_diag",
    "parse_dkms_status",
    "parse_driver_version",
    "parse_lspci",
    "parse_mokutil_sb_state",
    "parse_nccl_tests",
    "parse_nvcc_version",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_topo",
    "parse_nvidia_smi_xml",
]
