"""Production GPU fleet: an example to copy and edit.

    pyinfra inventories/prod.py deploy/gpu_node.py --dry      # show the plan
    pyinfra inventories/prod.py deploy/gpu_node.py            # provision
    pyinfra inventories/prod.py deploy/gpu_node.py --serial   # rolling (one host at a time)

Defaults for every host are in group_data/all.py; each group below overrides what differs.
"""

# How pyinfra reaches every host of this inventory: an account with passwordless sudo.
_ssh = {"ssh_user": "gpuadmin", "_sudo": True}

# 8x A100 SXM4 80GB per host (HGX A100, NVSwitch: Fabric Manager comes with "auto").
a100_nodes = (
    ["gpu-a100-01.dc1.example.net", "gpu-a100-02.dc1.example.net"],
    {**_ssh, "gpu_count": 8},
)

# 8x H100 SXM5 per host (HGX H100): open kernel modules, Fabric Manager.
h100_nodes = (
    ["gpu-h100-01.dc1.example.net", "gpu-h100-02.dc1.example.net"],
    {**_ssh, "gpu_count": 8, "reboot_timeout_s": 1200},
)

# Older V100 PCIe boxes: proprietary modules (open ones do not drive Volta); branch 580 is the
# last that supports them, so it is pinned here even if the fleet default moves on.
v100_legacy = (
    ["gpu-v100-01.dc2.example.net"],
    {
        **_ssh,
        "gpu_count": 4,
        "driver_branch": 580,
        "kernel_module_flavor": "proprietary",
        # A venv on the OS's python3 (3.10 on Ubuntu 22.04): python_version is for conda and uv
        # only; python_interpreter picks another OS interpreter (e.g. "python3.11").
        "python_env": "venv",
    },
)
