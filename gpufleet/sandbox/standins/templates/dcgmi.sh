#!/bin/sh
# gpufleet sandbox stand-in for dcgmi of NVIDIA DCGM @DCGM_VERSION@. It runs no diagnostic:
# it says so on standard error and fails, so nothing can mistake it for a passing `dcgmi diag`.
echo "dcgmi: gpufleet sandbox stand-in for DCGM @DCGM_VERSION@ (arguments: $*); no GPU, no diagnostics here" >&2
exit 1
