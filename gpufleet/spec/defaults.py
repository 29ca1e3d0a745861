"""Defaults that are not one key's value: pinned installer, repository key, key prefixes."""

from __future__ import annotations

# Data keys that belong to pyinfra itself: connector settings (pyinfra 3.10 connectors:
# ssh, docker, dockerssh, chroot, local, fake, terraform, vagrant, plus the winrm plugin) and
# global operation arguments given as data (`_sudo`, `_env`, ...). User-private keys: `x_`.
PYINFRA_KEY_PREFIXES = (
    "_",
    "ssh_",
    "docker_",
    "dockerssh_",
    "chroot_",
    "local_",
    "fake_",
    "terraform_",
    "vagrant_",
    "winrm_",
)
USER_KEY_PREFIX = "x_"

# Miniforge installer pinned by version and sha256 per `uname -m`. Source of the checksums:
# nebari-dev/nebari-docker-images Dockerfile (MINIFORGE_VERSION=25.3.0-3, the
# MINIFORGE_X86_64_SHA256 / MINIFORGE_AARCH64_SHA256 it verifies the release assets with).
MINIFORGE_VERSION = "25.3.0-3"
MINIFORGE_SHA256 = {
    "x86_64": "1b57f8cb991982063f79b56176881093abb1dc76d73fda32102afde60585b5a1",
    "aarch64": "ac89f17b0eec4e98d38a53d1ae688e0f22c77d8ea5b5f008c2455e90ef095339",
}
MINIFORGE_URL = (
    "https://github.com/conda-forge/miniforge/releases/download/{version}/"
    "Miniforge3-{version}-Linux-{arch}.sh"
)
# NVIDIA CUDA repository signing key (3bf863cc.pub, in use since the April 2022 rotation).
# Fingerprint as pinned by other deploy tools, e.g. NVIDIA_KEY_FINGERPRINT in public code
# next to ".../repos/ubuntu2204/x86_64/3bf863cc.pub"; the short id A4B469963BF863CC is what apt
# prints in NO_PUBKEY errors.
NVIDIA_REPO_KEY_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
# nccl-tests source release built on multi-GPU hosts (without MPI). Version, URL form and sha256
# as Spack pins them: spack/spack-packages, repos/spack_repo/builtin/packages/nccl_tests/package.py
# (commit d9bc1530), version("2.17.6", sha256=...) with url .../archive/v<version>.tar.gz.
NCCL_TESTS_VERSION = "2.17.6"
NCCL_TESTS_URL = f"https://github.com/NVIDIA/nccl-tests/archive/v{NCCL_TESTS_VERSION}.tar.gz"
NCCL_TESTS_SHA256 = "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
