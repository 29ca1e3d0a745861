"""Longer explanations of some inventory keys than their one-line doc, for inventory-keys.md."""

from __future__ import annotations

# key -> the meaning shown in docs/reference/inventory-keys.md instead of the key's one-line
# doc (gpufleet/spec/model.py), where the reference has more to say. Links are relative to
# docs/reference/.
NOTES: dict[str, str] = {
    "python_interpreter": "the OS archive's interpreter a venv (without uv) is built on, e.g. "
    "`'python3.9'` on Ubuntu 20.04; unset: `python3` (see "
    "[the version matrix](../explanation/version-matrix.md))",
    "conda_channel_url": "conda-forge mirror for air-gapped sites: the base URL serving "
    "`conda-forge/` (written as `channel_alias` into `<env_prefix>/miniforge3/.condarc`, mode "
    "600); unset: conda.anaconda.org; may carry credentials",
    "cache_os_archive": "apt fetches the OS archive through the fleet cache too (false: the "
    "host's own apt proxy or mirror)",
    "cache_fallback_direct": "a host whose fleet cache does not answer downloads from upstream "
    "instead of failing (see [the fleet cache](../explanation/fleet-cache.md))",
    "cache_upstream_proxy": "HTTP proxy the fleet cache's apt-cacher-ng fetches through, e.g. "
    "http://proxy:3128 (no login)",
    "min_free_disk_gib": "free GiB needed before installing, on each filesystem the deploy "
    "writes to (`/`, `/var/cache/apt`, `env_prefix`, `payload_dir`)",
    "deploy_stamp": "skip planning a host whose last run changed nothing while nothing its plan "
    "read has changed ([deploy stamps](../explanation/deploy-stamps.md))",
    "interconnect_gbps": "host-to-host link speed in Gbit/s the cluster tier judges iperf3 "
    "against (1-3200)",
    "nccl_tests_mpi": "also build nccl-tests with MPI (OpenMPI) into `<nccl-tests dir>-mpi` for "
    "the cluster tier's NCCL part; needs a GPU, `nccl_tests` not off, the system CUDA toolkit "
    "and NCCL",
    "nccl_fabric_gbps": "the GPU fabric per host in Gbit/s (every NIC NCCL uses, e.g. 8x 400 = "
    "3200; 1-3200) the cluster tier's NCCL floor is keyed off; unset: `interconnect_gbps`",
    "nccl_transport": "the transport NCCL must use between hosts (`ib`: InfiniBand or RoCE "
    "verbs, `efa`, `socket`); another one fails the NCCL part; auto: any",
    "nccl_socket_ifname": "`NCCL_SOCKET_IFNAME` for the cluster tier's all_reduce_perf (NCCL's "
    "syntax: `ens`, `=eth0`, `^docker,lo`); one value per group",
    "nccl_ib_hca": "`NCCL_IB_HCA` for the cluster tier's all_reduce_perf (e.g. `mlx5`, "
    "`=mlx5_0:1,mlx5_1:1`); one value per group",
    "calibration_file": "control-node calibration TOML: full-tier floors (see "
    "[calibration](../howto/calibration.md))",
    "scheduler": "the fleet's scheduler: `slurm` turns on the scheduler_integration stage and "
    "drain/resume (see [Slurm](../howto/slurm.md))",
    "slurm_controller": "slurmctld's host name or address (where `gpufleet rollout` runs scontrol)",
    "slurm_health_interval": "Slurm `HealthCheckInterval` (s) for gpufleet's health check",
    "thresholds": "validation threshold overrides by name, e.g. `{'xla_speedup_min': 1.2}` "
    "(names: `validation/verdicts/thresholds.toml`), or a judged figure's floor by its dotted "
    "name, e.g. `{'xla.speedup.amp': 1.2}` ([figure names](metrics.md#figure-names)); an "
    "unknown name is refused",
}
