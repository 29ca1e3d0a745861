"""The cross-host all_reduce_perf command lines: OpenMPI's mpirun over SSH, or Slurm's srun.

With MPI each rank drives one GPU (``-g 1``), one rank per GPU of every host. Without Slurm,
``mpirun`` runs on the group's first host and starts the other ranks over SSH (OpenMPI's rsh
launcher); with ``scheduler: slurm`` one ``srun`` job spans the nodes, its ranks wired up by
PMIx. Every element comes from checked inventory values; the launcher quotes each for the shell.

Example:
    >>> mpirun_argv([h1, h2], 8)[-9:-7]
    ['/opt/gpufleet/nccl-tests/38974e703421-mpi/bin/all_reduce_perf', '-b']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpufleet.cluster import srun
from gpufleet.cluster.config import ClusterError, ClusterHost

# Debian and Ubuntu's OpenMPI by its own name (openmpi-bin): `mpirun` is an alternative that
# MPICH can take over.
MPIRUN = "/usr/bin/mpirun.openmpi"
# OpenMPI's rsh launcher options: ssh, and never a password prompt that would hang the run.
RSH_ARGS = "-o BatchMode=yes"
# Slurm's PMIx plugin (`srun --mpi=list` shows it); Debian and Ubuntu's OpenMPI is built with PMIx.
SRUN_MPI = "pmix"
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,253}")


def perf_argv(host: ClusterHost) -> list[str]:
    """``all_reduce_perf -b MIN -e MAX -f 2 -g 1`` of the host's MPI build (sizes: the
    inventory's nccl_tests_min_bytes and nccl_tests_max_bytes)."""
    if host.nccl_mpi_bin is None:
        raise ClusterError(f"host {host.name}: nccl_tests_mpi is off, no MPI build to run")
    binary = f"{host.nccl_mpi_bin}/all_reduce_perf"
    return [binary, "-b", host.nccl_min_bytes, "-e", host.nccl_max_bytes, "-f", "2", "-g", "1"]


def _same(hosts: Sequence[ClusterHost], key: str) -> object:
    values = {getattr(h, key) for h in hosts}
    if len(values) > 1:
        raise ClusterError(
            f"{key} differs between the hosts of the group ({', '.join(map(repr, values))}): "
            "one all_reduce_perf run passes one value to every rank. Fix: give the group one value."
        )
    return values.pop()


def nccl_env(hosts: Sequence[ClusterHost]) -> dict[str, str]:
    """NCCL's variables for every rank: INFO (the transport lines gpufleet reads), and the
    inventory's NCCL_SOCKET_IFNAME and NCCL_IB_HCA where set.

    Example: ``{"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "ens"}``
    """
    env = {"NCCL_DEBUG": "INFO"}
    ifname, hca = _same(hosts, "nccl_socket_ifname"), _same(hosts, "nccl_ib_hca")
    if ifname:
        env["NCCL_SOCKET_IFNAME"] = str(ifname)
    if hca:
        env["NCCL_IB_HCA"] = str(hca)
    return env


def mpirun_argv(hosts: Sequence[ClusterHost], gpus_per_host: int) -> list[str]:
    """``mpirun -np N*G -H a:G,b:G ... all_reduce_perf`` from the first host.

    ``--tag-output`` labels each line with its rank (gpufleet.parsers.nccl strips it);
    ``--bind-to none`` leaves the CPU choice to NCCL; ``-x`` sends NCCL's variables to the
    remote ranks, which do not inherit the first host's environment.
    """
    for host in hosts:
        if not _PLAIN.fullmatch(host.address):
            raise ClusterError(
                f"host {host.name}: mpirun's -H host:slots cannot take the address "
                f"{host.address!r}. Fix: set cluster_address to a host name or IPv4 address."
            )
    gpus = int(gpus_per_host)
    exports = [a for k, v in nccl_env(hosts).items() for a in ("-x", f"{k}={v}")]
    return [
        MPIRUN,
        "--tag-output",
        "--bind-to",
        "none",
        "--mca",
        "plm_rsh_agent",
        "ssh",
        "--mca",
        "plm_rsh_args",
        RSH_ARGS,
        "-np",
        str(gpus * len(hosts)),
        "-H",
        ",".join(f"{h.address}:{gpus}" for h in hosts),
        *exports,
        *perf_argv(hosts[0]),
    ]


def srun_nccl_argv(hosts: Sequence[ClusterHost], run_id: str, gpus_per_host: int) -> list[str]:
    """One ``srun`` job over the group's nodes, one task per GPU, PMIx, ``--label`` lines.

    The job carries the run's name (the clean-up's ``scancel --name``) and, like the workers'
    jobs, ``--exclusive --immediate`` so that it never waits behind users' jobs.
    """
    gpus = int(gpus_per_host)
    partition = _same(hosts, "slurm_partition")
    args = [
        "srun",
        f"--job-name={srun.job_name(run_id)}",
        f"--nodelist={','.join(h.name for h in hosts)}",
        f"--nodes={len(hosts)}",
        f"--ntasks-per-node={gpus}",
        f"--gres=gpu:{gpus}",
        f"--mpi={SRUN_MPI}",
        "--exclusive",
        f"--immediate={srun.IMMEDIATE_S}",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--label",
        "--quiet",
    ]
    if partition:
        args.append(f"--partition={partition}")
    return [*args, *perf_argv(hosts[0])]
