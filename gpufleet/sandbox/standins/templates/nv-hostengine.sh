#!/bin/sh
# gpufleet sandbox stand-in for nv-hostengine of NVIDIA DCGM @DCGM_VERSION@.
# There is no GPU to watch: it logs that it is a stand-in and stays up, so that the unit the
# deploy enables is really running under the host's systemd.
echo "nv-hostengine: gpufleet sandbox stand-in for DCGM @DCGM_VERSION@ (arguments: $*); no GPU; staying up"
exec sleep infinity
