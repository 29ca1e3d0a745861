"""nccl-tests from a pinned source release: for the full tier, and with MPI for the cluster tier."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import OperationError, deploy

from gpufleet.matrix import gpu_by_device_id
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import build
from gpufleet.spec import urls
from gpufleet.stages.node import NodePlan, node_plan

# Build tools nccl-tests' Makefile needs beside the CUDA toolkit (nvcc) and libnccl-dev.
BUILD_TOOLS = ["make", "g++"]
# OpenMPI for the MPI build (nccl_tests_mpi): mpirun (openmpi-bin) and the headers and libmpi
# (libopenmpi-dev). Debian 12's version read with apt-cache policy (bookworm main); other
# releases install their archive's version (a warning says so) until one is read for them.
MPI_PACKAGES: dict[tuple[str, str], list[str]] = {
    ("debian", "12"): ["openmpi-bin=4.1.4-3+b1", "libopenmpi-dev=4.1.4-3+b1"],
}
MPI_UNPINNED = ["openmpi-bin", "libopenmpi-dev"]
# Debian and Ubuntu's libopenmpi-dev puts mpi.h and libmpi.so under one multiarch directory
# (dpkg -c libopenmpi-dev_4.1.4-3+b1: usr/lib/x86_64-linux-gnu/openmpi/{include,lib}).
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}


@deploy("gpufleet nccl_tests")
def nccl_tests(plan: NodePlan | None = None):
    """
    Build nccl-tests (``all_reduce_perf`` and friends, without MPI) against the system CUDA
    toolkit and NCCL that ``cuda_stack`` installs, from the archive ``nccl_tests_url`` names,
    checked against ``nccl_tests_sha256`` in the command that builds it. With
    ``nccl_tests: auto`` only hosts with two or more GPUs get it; the plan says why not.
    With ``nccl_tests_mpi: true`` OpenMPI is installed and the same archive is built again with
    MPI into ``<nccl-tests dir>-mpi`` (every host of a group, one GPU or more): the cluster
    tier's ``all_reduce_perf`` across hosts, one rank per GPU.

    .. code:: python

        nccl_tests()
    """
    plan = plan or node_plan()
    why_not = skip_reason(plan)
    spec = plan.spec
    if why_not:
        host.noop(f"nccl-tests not built: {why_not}")
        if not spec.nccl_tests_mpi:
            return
    gpufleet_apt.install(name="build tools for nccl-tests", packages=BUILD_TOOLS)
    if not why_not:
        build.nccl_tests(
            name=f"nccl-tests built in {spec.nccl_tests_dir} (sha256 checked)",
            url=urls.hidden(spec.nccl_tests_url) or spec.nccl_tests_url,
            sha256=spec.nccl_tests_sha256,
            prefix=spec.nccl_tests_dir,
            nvcc_gencode=nvcc_gencode(plan),
            proxy=spec.apt_proxy_hidden,
        )
    if not spec.nccl_tests_mpi:
        return
    packages, pinned = mpi_packages(plan.state.os_id, plan.state.os_version)
    if not pinned:
        logger.warning(
            "%s: no pinned OpenMPI version for %s %s; the archive's version is installed",
            host.name,
            plan.state.os_id,
            plan.state.os_version,
        )
    gpufleet_apt.install(name="OpenMPI for nccl-tests across hosts", packages=packages)
    build.nccl_tests(
        name=f"nccl-tests with MPI built in {mpi_dir(spec.nccl_tests_dir)} (sha256 checked)",
        url=urls.hidden(spec.nccl_tests_url) or spec.nccl_tests_url,
        sha256=spec.nccl_tests_sha256,
        prefix=mpi_dir(spec.nccl_tests_dir),
        nvcc_gencode=nvcc_gencode(plan),
        proxy=spec.apt_proxy_hidden,
        mpi_home=mpi_home(plan.state.arch),
    )


def skip_reason(plan: NodePlan) -> str | None:
    """Why this host gets no nccl-tests, else None. Example: ``"nccl_tests: off"``."""
    spec = plan.spec
    if spec.nccl_tests == "off":
        return "nccl_tests: off"
    if not (spec.install_cuda_toolkit and spec.install_nccl):
        return "it needs the system CUDA toolkit and NCCL (install_cuda_toolkit, install_nccl)"
    if spec.nccl_tests == "auto" and len(plan.state.gpus) < 2:
        return f"{len(plan.state.gpus)} GPU(s) on the PCI bus (nccl_tests: auto builds it for 2+)"
    return None


def nvcc_gencode(plan: NodePlan) -> str:
    """``-gencode`` flags for the compute capabilities of the host's known GPUs, so the build
    compiles for them alone; empty (nccl-tests' own default list) when none is known.

    Example: 8x H100 -> ``"-gencode=arch=compute_90,code=sm_90"``
    """
    capabilities = sorted(
        {
            model.compute_capability
            for device in plan.state.gpus
            if (model := gpu_by_device_id(device.device_id)) and not model.is_nvswitch
        }
    )
    return " ".join(f"-gencode=arch=compute_{a}{b},code=sm_{a}{b}" for a, b in capabilities)


def mpi_dir(nccl_tests_dir: str) -> str:
    """The MPI build beside the single-host one (its own prefix: each install replaces its
    whole directory). Example: ``/opt/gpufleet/nccl-tests/38974e703421-mpi``."""
    return f"{nccl_tests_dir}-mpi"


def mpi_home(arch: str) -> str:
    """OpenMPI's MPI_HOME on Debian and Ubuntu. Example: ``"/usr/lib/x86_64-linux-gnu/openmpi"``."""
    if arch not in MULTIARCH:
        raise OperationError(f"nccl_tests_mpi: no OpenMPI layout known for architecture {arch!r}")
    return f"/usr/lib/{MULTIARCH[arch]}/openmpi"


def mpi_packages(os_id: str, os_version: str) -> tuple[list[str], bool]:
    """(package specs, pinned): the pinned list for a known release, else the archive's."""
    version = os_version.split(".")[0] if os_id == "debian" else os_version
    pinned = MPI_PACKAGES.get((os_id, version))
    return (list(pinned), True) if pinned else (list(MPI_UNPINNED), False)
