#!/bin/sh
# gpufleet sandbox stand-in for nv-fabricmanager of NVIDIA driver @DRIVER_VERSION@.
# There is no NVSwitch to manage: it logs that it is a stand-in and stays up, so that
# the unit the deploy enables is really running under the host's systemd.
echo "nv-fabricmanager: gpufleet sandbox stand-in for Fabric Manager @DRIVER_VERSION@ (arguments: $*); no NVSwitch, no GPU; staying up"
exec sleep infinity
