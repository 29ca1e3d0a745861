"""The probe lists every package that follows the driver's branch, so a branch change replaces
them all: Fabric Manager, NSCQ and NVSDM included, suffixed (R575) and unsuffixed (R580)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from gpufleet.matrix.apt_names import NVLSM_PACKAGE, driver_package_names, fabric_package_names
from gpufleet.matrix.drivers import DRIVER_BRANCHES
from gpufleet.stages.host_probe import DRIVER_PACKAGE_PATTERNS, HostState, parse_probe
from tests.unit.fake_fleet import PROBE, probe_packages

# What the deploy installed on an HGX H100 on R575 (Ubuntu 22.04), with the sub-packages
# NVIDIA's metapackages pull in, at the versions gpufleet/matrix/record/nvidia_repos.json
# records for them; and what neither the driver nor the probe is about.
HGX_575 = {
    "nvidia-open-575": "575.57.08-0ubuntu1",
    "nvidia-driver-575-open": "575.57.08-0ubuntu1",
    "libnvidia-compute-575": "575.57.08-0ubuntu1",
    "nvidia-kernel-common-575": "575.57.08-0ubuntu1",
    "nvidia-fabricmanager-575": "575.57.08-1",
    "libnvidia-nscq-575": "575.57.08-1",
    "libnvsdm-575": "575.57.08-1",
    "nvlsm": "2025.06.5-1",
    "libnccl2": "2.27.7-1+cuda12.9",
    "dkms": "2.8.7-2ubuntu2",
}


def probed(installed: dict[str, str]) -> HostState:
    """The HostState of a host with `installed`, read through the probe's patterns."""
    lines = [f"{PROBE}packages"]
    lines += [f"ii  {name} {version}" for name, version in probe_packages(installed).items()]
    return parse_probe(lines)


def branch_packages(branch: int) -> list[str]:
    """Every package name the deploy installs for `branch` whose version is the driver's."""
    names: list[str] = []
    for flavor in ("open", "proprietary"):
        drivers, pinning = driver_package_names(branch, flavor)
        names += drivers + ([pinning] if pinning else [])
    for repo_arch in ("x86_64", "sbsa"):
        names += fabric_package_names(branch, nvlink5=True, repo_arch=repo_arch)
    return sorted(set(names) - {NVLSM_PACKAGE})


@pytest.mark.parametrize("branch", sorted(DRIVER_BRANCHES))
def test_every_package_that_follows_the_branch_is_listed_by_the_probe(branch: int) -> None:
    unlisted = [
        name
        for name in branch_packages(branch)
        if not any(fnmatchcase(name, pattern) for pattern in DRIVER_PACKAGE_PATTERNS)
    ]
    assert unlisted == [], f"the probe's dpkg-query patterns miss {unlisted}"


def test_a_change_from_575_to_580_removes_its_fabric_packages_first() -> None:
    state = probed(HGX_575)
    assert state.other_branch_packages(580) == [
        "libnvidia-compute-575",
        "libnvidia-nscq-575",
        "libnvsdm-575",
        "nvidia-driver-575-open",
        "nvidia-fabricmanager-575",
        "nvidia-kernel-common-575",
        "nvidia-open-575",
    ]
    assert state.installed_branches == {575}


def test_unsuffixed_fabric_packages_of_580_are_replaced_on_a_change_to_590() -> None:
    state = probed(
        {
            "nvidia-open": "580.159.04-1ubuntu1",
            "nvidia-driver-pinning-580": "580-1ubuntu1",
            "nvidia-fabricmanager": "580.159.04-1",
            "libnvidia-nscq": "580.159.04-1",
            "libnvsdm": "580.159.04-1",
        }
    )
    assert state.other_branch_packages(590) == [
        "libnvidia-nscq",
        "libnvsdm",
        "nvidia-driver-pinning-580",
        "nvidia-fabricmanager",
        "nvidia-open",
    ]
    assert state.other_branch_packages(580) == []


def test_nvlsm_and_the_cuda_stack_are_not_the_driver() -> None:
    state = probed(HGX_575)
    assert not {"nvlsm", "libnccl2", "dkms"} & set(state.packages)
