#!/bin/sh
# gpufleet sandbox stand-in for nvidia-persistenced of NVIDIA driver @DRIVER_VERSION@.
# There is no GPU to keep initialised: it logs that it is a stand-in and stays up, so that
# the unit the deploy enables is really running under the host's systemd.
echo "nvidia-persistenced: gpufleet sandbox stand-in for driver @DRIVER_VERSION@ (arguments: $*); no GPU, no NVIDIA kernel module; staying up"
exec sleep infinity
