"""Pure parsers over the output of host commands (nvidia-smi, lspci, dkms, ...); no I/O."""

from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it. Resolved lazily so that each submodule can be
# imported (and tested) on its own.
_EXPORTS = {
    "parse_lspci": "pci",
    "parse_mokutil_sb_state": "system",
    "parse_driver_version": "system",
    "parse_nvcc_version": "system",
    "parse_dkms_status": "system",
    "parse_nvidia_smi_csv": "nvidia_smi",
    "parse_nvidia_smi_xml": "nvidia_smi",
    "parse_nvidia_smi_topo": "topo",
    "parse_nccl_tests": "nccl",
    "diagnose": "diagnose",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'gpufleet.parsers' has no attribute {name!r}")
    module = importlib.import_module(f"gpufleet.parsers.{_EXPORTS[name]}")
    return getattr(module, name)
