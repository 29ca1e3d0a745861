"""A mixed fleet: single-L4 inference servers beside 8x A100 SXM4 training servers.

    pyinfra inventories/examples/mixed_l4_a100.py deploy/gpu_node.py --dry \
        --group-data inventories/group_data
    gpufleet validate inventories/examples/mixed_l4_a100.py --limit l4_inference --tier quick

Each group gets what its GPUs need: the matrix resolves the driver flavour and Fabric Manager
per host from the GPUs on its PCI bus, so one inventory serves both. Every key:
docs/reference/inventory-keys.md.
"""

_ssh = {"ssh_user": "gpuadmin", "_sudo": True}

# 1x NVIDIA L4 (PCIe, 72 W) per host: no NVLink, no Fabric Manager, one GPU to validate.
l4_inference = (
    ["inf-l4-01.dc1.example.net", "inf-l4-02.dc1.example.net", "inf-l4-03.dc1.example.net"],
    {
        **_ssh,
        "gpu_count": 1,
        "python_env": "venv",  # a plain venv on the OS's python3 (3.10 on Ubuntu 22.04)
        "nccl_tests": "off",  # one GPU: nothing for all_reduce_perf to measure
        "periodic_schedule": "*-*-* 04:00:00",  # systemd OnCalendar=: daily at 04:00
    },
)

# 8x A100-SXM4-80GB per host (HGX A100, NVSwitch).
a100_training = (
    ["train-a100-01.dc1.example.net", "train-a100-02.dc1.example.net"],
    {
        **_ssh,
        "gpu_count": 8,
        "reboot_timeout_s": 1200,
        "dcgm_diag_level": 3,  # dcgmi diag -r 3 in every tier's DCGM check, not only the full one
        "node_exporter": True,
    },
)
