#!/bin/sh
# gpufleet sandbox stand-in for nvidia-smi of NVIDIA driver @DRIVER_VERSION@ (package @PACKAGE@).
# This host has no NVIDIA GPU and no NVIDIA kernel module: like the real nvidia-smi without a
# loaded driver, every query fails with NVIDIA's own message and exit status 9. Only --version
# answers, in the real format, with the version of the driver package this file belongs to.
# Sources of the texts: gpufleet/sandbox/standins/SOURCES.md.
case "$1" in
    --version)
        printf '%-20s: %s\n' 'NVIDIA-SMI version' '@DRIVER_VERSION@'
        printf '%-20s: %s\n' 'NVML version' '@NVML_VERSION@'
        printf '%-20s: %s\n' 'DRIVER version' '@DRIVER_VERSION@'
        printf '%-20s: %s\n' 'CUDA Version' '@CUDA_VERSION@'
        exit 0
        ;;
    --gpufleet-standin)
        echo 'gpufleet sandbox stand-in: nvidia-smi of driver @DRIVER_VERSION@; no GPU here'
        exit 0
        ;;
esac
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
