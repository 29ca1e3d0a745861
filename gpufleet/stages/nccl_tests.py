"""nccl-tests built on multi-GPU hosts, from a pinned source release, for the full tier."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from gpufleet.matrix import gpu_by_device_id
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import build
from gpufleet.spec import urls
from gpufleet.stages.node import NodePlan, node_plan

# Build tools nccl-tests' Makefile needs beside the CUDA toolkit (nvcc) and libnccl-dev.
BUILD_TOOLS = ["make", "g++"]


@deploy("gpufleet nccl_tests")
def nccl_tests(plan: NodePlan | None = None):
    """
    Build nccl-tests (``all_reduce_perf`` and friends, without MPI) against the system CUDA
    toolkit and NCCL that ``cuda_stack`` installs, from the archive ``nccl_tests_url`` names,
    checked against ``nccl_tests_sha256`` in the command that builds it. With
    ``nccl_tests: auto`` only hosts with two or more GPUs get it; the plan says why not.

    .. code:: python

        nccl_tests()
    """
    plan = plan or node_plan()
    why_not = skip_reason(plan)
    if why_not:
        host.noop(f"nccl-tests not built: {why_not}")
        return
    spec = plan.spec
    gpufleet_apt.install(name="build tools for nccl-tests", packages=BUILD_TOOLS)
    build.nccl_tests(
        name=f"nccl-tests built in {spec.nccl_tests_dir} (sha256 checked)",
        url=urls.hidden(spec.nccl_tests_url) or spec.nccl_tests_url,
        sha256=spec.nccl_tests_sha256,
        prefix=spec.nccl_tests_dir,
        nvcc_gencode=nvcc_gencode(plan),
        proxy=spec.apt_proxy_hidden,
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
