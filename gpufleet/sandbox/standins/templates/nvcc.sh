#!/bin/sh
# gpufleet sandbox stand-in for nvcc of CUDA @CUDA_VERSION@: it compiles nothing.
# --version prints the recorded output of the real nvcc of this release
# (source: gpufleet/sandbox/standins/SOURCES.md).
case "$1" in
    --version|-V)
        cat <<'RECORDED'
@RECORDED_VERSION@
RECORDED
        exit 0
        ;;
esac
echo "nvcc: gpufleet sandbox stand-in for CUDA @CUDA_VERSION@; it cannot compile anything" >&2
exit 1
