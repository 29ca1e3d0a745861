"""Vendor diagnostics (DCGM's dcgmi diag, nccl-tests): pure gates over parsed output."""

# judge_dcgm(parse_dcgm_diag(text, exit_code)) and
# judge_nccl(figure_of(parse_nccl_tests(text), exit_code), gpu_model=..., gpu_count=...,
# interconnect=...) return a Verdict; the floors table is gpufleet.floors.nccl.

from gpufleet.vendor.dcgm_gate import judge_dcgm
from gpufleet.vendor.nccl_gate import NcclFigure, figure_of, judge_nccl
from gpufleet.vendor.verdict import Verdict

__all__ = ["NcclFigure", "Verdict", "figure_of", "judge_dcgm", "judge_nccl"]
