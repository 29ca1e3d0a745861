"""Staging: one host of each kind behind the site proxy, pulling from the internal mirrors.

    pyinfra inventories/staging.py deploy/gpu_node.py --dry

Same defaults as production (group_data/all.py), plus the mirror settings below.
"""

# How pyinfra reaches every host of this inventory: an account with passwordless sudo.
_ssh = {"ssh_user": "gpuadmin", "_sudo": True}

_mirrors = {
    # NVIDIA's repository mirrored 1:1 (<url>/<distro>/<arch>/ as upstream).
    "nvidia_repo_url": "https://mirror.staging.example.net/nvidia/cuda/repos",
    "pip_index_url": "https://pypi.staging.example.net/simple",
    "miniforge_url": (
        "https://mirror.staging.example.net/miniforge/25.3.0-3/Miniforge3-25.3.0-3-Linux-x86_64.sh"
    ),
    "apt_proxy": "http://proxy.staging.example.net:3128",
}

a100_nodes = (["gpu-a100-stg-01.stg.example.net"], {**_ssh, **_mirrors, "gpu_count": 4})

h100_nodes = (["gpu-h100-stg-01.stg.example.net"], {**_ssh, **_mirrors, "gpu_count": 8})

# A CPU-only host that still runs the whole deploy (driver packages, CUDA, TF) for testing
# the plan, without GPUs on its bus.
cpu_canary = (
    ["cpu-canary-01.stg.example.net"],
    {**_ssh, **_mirrors, "gpu_less": True, "persistenced": False, "reboot": "never"},
)
