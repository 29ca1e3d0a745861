"""Every package the resolver can name exists, at its version, in the record of NVIDIA's repos.

The walk covers each OS x arch x TensorFlow release x GPU mix x driver branch x module flavour
(and each CUDA override) the resolver accepts; whatever it refuses must say why and the fix.
The record (gpufleet/matrix/record/nvidia_repos.json) comes from public sources, not from the
resolver, so a wrong name or version in either fails here.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from importlib import resources

import pytest

from gpufleet import matrix
from gpufleet.matrix.apt_names import NVLSM_PACKAGE
from gpufleet.matrix.repo_record import RepoRecord, record, repository

OSES = [("ubuntu", "20.04"), ("ubuntu", "22.04"), ("ubuntu", "24.04"), ("debian", "12")]
ARCHES = ["x86_64", "aarch64"]
# No GPU, single GPUs of each architecture, HGX A100/H100 (GPUs + NVSwitch), HGX B200 (NVLink 5),
# Volta (proprietary modules), and a mix with an id the GPU table does not know.
GPU_MIXES: list[tuple[str, ...]] = [
    (),
    ("1db1",),
    ("1eb8",),
    ("27b8",),
    ("20b2", "1af1"),
    ("2330", "22a3"),
    ("2335",),
    ("2901",),
    ("2330", "abcd"),
]
BRANCHES: list[int | None] = [None, *matrix.DRIVER_BRANCHES]
FLAVORS = ["auto", "open", "proprietary"]


def _attempts() -> Iterator[tuple[dict, matrix.Resolution | None, matrix.MatrixError | None]]:
    for tf, (os_id, version), arch, gpus, branch, flavor in itertools.product(
        matrix.TF_RELEASES, OSES, ARCHES, GPU_MIXES, BRANCHES, FLAVORS
    ):
        yield _try(
            tf,
            os_id=os_id,
            os_version=version,
            arch=arch,
            gpu_device_ids=gpus,
            driver_branch=branch,
            kernel_module_flavor=flavor,
            # arm64 GPU hosts are refused while a CUDA TensorFlow is required (see below).
            require_cuda_build=arch == "x86_64",
        )
    for tf, (os_id, version), arch, cuda in itertools.product(
        matrix.TF_RELEASES, OSES, ARCHES, matrix.CUDA_MIN_DRIVER
    ):
        yield _try(tf, os_id=os_id, os_version=version, arch=arch, cuda_version=cuda)


def _try(tf: str, **kwargs) -> tuple[dict, matrix.Resolution | None, matrix.MatrixError | None]:
    request = {"tf": tf, **kwargs}
    try:
        return request, matrix.resolve(tf, **kwargs), None
    except matrix.MatrixError as exc:
        return request, None, exc


@pytest.fixture(scope="module")
def walk() -> list[tuple[dict, matrix.Resolution | None, matrix.MatrixError | None]]:
    return list(_attempts())


def problems(resolution: matrix.Resolution, repo_record: RepoRecord) -> list[str]:
    """What the record contradicts in one resolution: each spec must be a real package (not a
    virtual name, not absent, not unknown) at its version, and the fabric packages that must
    follow the driver must have a build at one of the driver's recorded versions."""
    repo = repository(resolution.repo_distro, resolution.repo_arch)
    branch = resolution.driver_branch
    found = []
    for spec in matrix.apt_specs(resolution):
        status = repo_record.status(repo, spec, branch)
        if status.kind not in ("verified", "unverified"):
            found.append(f"{spec} in {repo}: {status.kind} ({status.why})")
    driver = resolution.driver_packages[0]
    driver_versions = {_upstream(p.version) for p in repo_record.find(repo, driver, branch)}
    for name in resolution.fabric_packages:
        if name == NVLSM_PACKAGE:
            continue
        versions = {_upstream(p.version) for p in repo_record.find(repo, name, branch)}
        if not versions & driver_versions:
            found.append(f"{name} in {repo}: no build at a version of {driver} ({driver_versions})")
    return found


def _upstream(version: str) -> str:
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def test_every_accepted_combination_names_only_recorded_packages(walk) -> None:
    accepted = [(req, res) for req, res, _ in walk if res is not None]
    # The walk is not empty by accident: every OS, both arches, every branch is reached.
    assert len(accepted) > 5000
    assert {(r.repo_distro, r.repo_arch) for _, r in accepted} == {
        (d, a) for d in ("ubuntu2004", "ubuntu2204", "ubuntu2404", "debian12") for a in ARCHES[:1]
    } | {(d, "sbsa") for d in ("ubuntu2004", "ubuntu2204", "ubuntu2404", "debian12")}
    assert {r.driver_branch for _, r in accepted} == set(matrix.DRIVER_BRANCHES)
    failures = {}
    for request, resolution in accepted:
        for problem in problems(resolution, record()):
            failures.setdefault(problem, request)
    assert not failures, "\n".join(f"{p}  <- {r}" for p, r in list(failures.items())[:20])


def test_every_refusal_says_why_and_the_fix(walk) -> None:
    refused = [(req, exc) for req, _, exc in walk if exc is not None]
    assert refused
    for request, exc in refused:
        for conflict in exc.conflicts:
            assert "Fix" in conflict, (request, conflict)


@pytest.mark.parametrize("tf", ["2.15.1", "2.16.2", "2.17.1"])
def test_tf_before_2_18_on_ubuntu_24_04_is_refused_for_every_host(walk, tf) -> None:
    for request, resolution, exc in walk:
        if request["tf"] == tf and request["os_version"] == "24.04":
            assert resolution is None, request
            assert any("Ubuntu 24.04" in c for c in exc.conflicts), request


@pytest.mark.parametrize("gpus", [mix for mix in GPU_MIXES if mix])
def test_arm64_gpu_hosts_are_refused_naming_ngc(gpus: tuple[str, ...]) -> None:
    for os_id, version in OSES:
        request, resolution, exc = _try(
            "2.21.0", os_id=os_id, os_version=version, arch="aarch64", gpu_device_ids=gpus
        )
        assert resolution is None and exc is not None, request
        assert any("NGC" in c for c in exc.conflicts), request


def test_the_default_nvswitch_hosts_get_only_verified_names_apart_from_dcgm_4_5_1() -> None:
    for os_version in ("22.04", "24.04"):
        r = matrix.resolve(
            "2.21.0", os_id="ubuntu", os_version=os_version, gpu_device_ids=["2330", "22a3"]
        )
        repo = repository(r.repo_distro, r.repo_arch)
        assert r.fabricmanager_package == "nvidia-fabricmanager" and r.driver_branch == 580
        unsettled = [
            s for s in matrix.apt_specs(r) if record().status(repo, s, 580).kind != "verified"
        ]
        assert all(s.startswith("datacenter-gpu-manager-4-") for s in unsettled), unsettled
    r = matrix.resolve(
        "2.20.0", os_id="ubuntu", os_version="20.04", gpu_device_ids=["2330", "22a3"]
    )
    assert r.fabricmanager_package == "nvidia-fabricmanager-575"


def test_the_record_names_the_virtual_fabric_manager_as_nvidia_apt_does() -> None:
    status = record().status("ubuntu2204/x86_64", "nvidia-fabricmanager-580")
    assert status.kind == "virtual" and "nvidia-fabricmanager 580.65.06-1" in status.why
    assert record().status("ubuntu2404/sbsa", "libnvsdm").kind == "absent"


def test_every_stanza_names_sources_listed_in_sources_md() -> None:
    folder = resources.files("gpufleet.matrix.record")
    sources = folder.joinpath("SOURCES.md").read_text()
    data = json.loads(folder.joinpath("nvidia_repos.json").read_text())
    for stanza in [*data["packages"], *data["absent"]]:
        for source in stanza["source"]:
            assert f"| `{source}` |" in sources, (stanza["Package"], source)


def _renamed(old: str, new: str) -> RepoRecord:
    data = json.loads(
        resources.files("gpufleet.matrix.record").joinpath("nvidia_repos.json").read_text()
    )
    data = copy.deepcopy(data)
    for stanza in data["packages"]:
        if stanza["Package"] == old:
            stanza["Package"] = new
    return RepoRecord(data)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("nvidia-fabricmanager", "nvidia-fabricmanager-580"),  # the name the deploy used to ask for
        ("libnccl2", "libnccl"),
        ("datacenter-gpu-manager-4-cuda13", "datacenter-gpu-manager-4-cuda12x"),
    ],
)
def test_a_name_changed_by_hand_in_the_record_is_caught(old: str, new: str) -> None:
    changed = _renamed(old, new)
    r = matrix.resolve(
        "2.21.0", os_id="ubuntu", os_version="22.04", gpu_device_ids=["2330", "22a3"]
    )
    assert problems(r, record()) == []
    assert any(old in p for p in problems(r, changed))
