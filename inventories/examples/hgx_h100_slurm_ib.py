"""An 8x H100 (HGX, NVSwitch) Slurm cluster with InfiniBand: a starting point to copy and edit.

    pyinfra inventories/examples/hgx_h100_slurm_ib.py deploy/gpu_node.py --dry \
        --group-data inventories/group_data      # the plan (or copy group_data/ beside it)
    gpufleet validate inventories/examples/hgx_h100_slurm_ib.py --tier full
    gpufleet validate inventories/examples/hgx_h100_slurm_ib.py --tier cluster --limit h100_ib

Every key: docs/reference/inventory-keys.md. Slurm: docs/howto/slurm.md; the cluster tier:
docs/howto/multi-node.md.
"""

# How pyinfra reaches every host: an account with sudo without a password.
_ssh = {"ssh_user": "gpuadmin", "_sudo": True}

_slurm = {
    # scheduler_integration stage: gres.conf, gpufleet's health check in slurm.conf; validate and
    # rollout drain failing hosts and resume the ones gpufleet drained.
    "scheduler": "slurm",
    "slurm_controller": "slurm-head-01.hpc.example.net",  # where `gpufleet rollout` runs scontrol
    "slurm_partition": "gpu",  # the cluster tier's srun jobs go here
    "slurm_health_interval": 300,  # seconds between Slurm's runs of the health check
}

# The compute nodes: 8x H100 80GB HBM3 each, NVSwitch (Fabric Manager comes with "auto").
h100_ib = (
    [
        ("gpu-h100-01.hpc.example.net", {"cluster_address": "10.40.0.11"}),
        ("gpu-h100-02.hpc.example.net", {"cluster_address": "10.40.0.12"}),
        ("gpu-h100-03.hpc.example.net", {"cluster_address": "10.40.0.13"}),
        ("gpu-h100-04.hpc.example.net", {"cluster_address": "10.40.0.14"}),
    ],
    {
        **_ssh,
        **_slurm,
        "gpu_count": 8,  # every host must show 8 GPUs, or it fails
        "driver_branch": 580,
        "reboot_timeout_s": 1200,  # HGX boards take long to POST
        # The cluster tier (validate --tier cluster): iperf3 over the TCP path (IPoIB here),
        # nccl-tests over the 8x 400G InfiniBand fabric, built with MPI.
        "interconnect_gbps": 200,  # the TCP path iperf3 measures, Gbit/s (iperf3 uses no RDMA)
        "nccl_fabric_gbps": 3200,  # 8x 400G NDR per host: the NCCL floor is 0.6 x this / 8 GB/s
        "nccl_transport": "ib",  # any other transport (NET/Socket) fails the NCCL part
        "nccl_ib_hca": "mlx5",  # NCCL_IB_HCA; one value per group
        "nccl_socket_ifname": "=ib0",  # NCCL_SOCKET_IFNAME for NCCL's bootstrap; one per group
        "nccl_tests_mpi": True,  # also build nccl-tests with OpenMPI for the cross-host run
        # Monitoring: textfile metrics for node_exporter (docs/howto/monitoring.md).
        "node_exporter": True,
        # After `gpufleet validate INV --calibrate --limit gpu-h100-01.hpc.example.net`, review
        # the file and give the group its floors (H100 throughput has no published figure):
        # "calibration_file": "calibration/nvidia-h100-80gb-hbm3-8x-nvswitch.toml",
        # Secure Boot on? Then: "secure_boot_plan": "ubuntu-signed" (docs/howto/secure-boot.md).
    },
)

# The Slurm controller, reached like the nodes; it has no GPU. Leave it out of a deploy with
# `--limit h100_ib` if gpufleet should not provision it.
slurm_head = (
    ["slurm-head-01.hpc.example.net"],
    {**_ssh, **_slurm, "gpu_less": True, "periodic_checks": False},
)
