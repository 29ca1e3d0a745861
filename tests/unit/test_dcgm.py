"""DCGM on the host: the matrix's pinned packages, and their sandbox stand-ins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet.matrix.dcgm import (
    DCGM_VERSION,
    dcgm_cuda_package,
    dcgm_packages,
    dcgm_unsupported_reason,
)
from gpufleet.sandbox.standins.catalog import standin_branches, standin_packages
from gpufleet.sandbox.standins.debs import build_deb
from gpufleet.sandbox.standins.model import StandinError, StandinPackage


def test_packages_are_core_and_the_resolved_cuda_major_at_one_pinned_version():
    assert dcgm_packages("13") == [
        f"datacenter-gpu-manager-4-core={DCGM_VERSION}",
        f"datacenter-gpu-manager-4-cuda13={DCGM_VERSION}",
        f"datacenter-gpu-manager-4-proprietary={DCGM_VERSION}",
        f"datacenter-gpu-manager-4-proprietary-cuda13={DCGM_VERSION}",
    ]
    assert dcgm_packages("12.9")[1] == f"datacenter-gpu-manager-4-cuda12={DCGM_VERSION}"
    assert dcgm_cuda_package("13.0") == "datacenter-gpu-manager-4-cuda13"
    assert DCGM_VERSION.startswith("1:4.")  # NVIDIA's DCGM 4 packages carry epoch 1


def test_a_cuda_major_dcgm_does_not_build_for_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="set dcgm: off"):
        dcgm_cuda_package("10.2")


@pytest.mark.parametrize(
    ("distro", "supported"),
    [("ubuntu2204", True), ("ubuntu2404", True), ("ubuntu2004", False), ("debian12", False)],
)
def test_only_the_distributions_dcgm_documents_get_it(distro, supported):
    reason = dcgm_unsupported_reason(distro)
    assert (reason is None) == supported
    if not supported:
        assert "Ubuntu 22.04 and 24.04 only" in reason


def _repo(distro: str) -> dict[str, StandinPackage]:
    packages = standin_packages(
        repo_distro=distro,
        repo_arch="x86_64",
        kernel_release="6.1.0-18-amd64",
        branches=standin_branches(distro),
        tf_version="2.21.0",
    )
    return {p.name: p for p in packages}


def test_the_sandbox_repository_carries_dcgm_where_nvidia_publishes_it():
    jammy = _repo("ubuntu2204")
    for spec in dcgm_packages("13") + dcgm_packages("12"):
        name, _, version = spec.partition("=")
        assert jammy[name].version == version
    assert "datacenter-gpu-manager-4-core" not in _repo("ubuntu2004")


def dcgm_standins(arch: str = "amd64") -> list[StandinPackage]:
    """The DCGM stand-ins of the ubuntu2204 repository, ``-core`` first."""
    packages = [p for p in _repo("ubuntu2204").values() if p.name.startswith("datacenter-gpu")]
    return sorted(packages, key=lambda p: p.name != "datacenter-gpu-manager-4-core")


def test_cuda_packages_depend_on_the_exact_core_and_core_on_lshw():
    by_name = {p.name: p for p in dcgm_standins("amd64")}
    core = by_name["datacenter-gpu-manager-4-core"]
    assert core.depends == ("lshw",)
    for major in ("12", "13"):
        assert by_name[f"datacenter-gpu-manager-4-cuda{major}"].depends == (
            f"datacenter-gpu-manager-4-core (= {DCGM_VERSION})",
        )
    assert {f.path for f in core.files} == {
        "/usr/bin/nv-hostengine",
        "/usr/bin/dcgmi",
        "/lib/systemd/system/nvidia-dcgm.service",
    }


def test_an_epoch_is_kept_in_the_control_file_and_left_out_of_the_file_name(tmp_path):
    core = dcgm_standins("amd64")[0]
    assert core.deb_filename == "datacenter-gpu-manager-4-core_4.5.1-1_amd64.deb"
    deb = build_deb(core, tmp_path, tmp_path / "work")
    assert deb.name == core.deb_filename
    version = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == DCGM_VERSION


def test_a_malformed_epoch_is_still_refused():
    with pytest.raises(StandinError, match="not a valid Debian version"):
        StandinPackage("dcgm-test", "a:1.0-1", "amd64", "x")


def test_the_dcgmi_stand_in_never_looks_like_a_passing_diagnostic(tmp_path):
    core = dcgm_standins("amd64")[0]
    dcgmi = next(f for f in core.files if f.path == "/usr/bin/dcgmi")
    script = Path(tmp_path) / "dcgmi"
    script.write_text(dcgmi.content)
    result = subprocess.run(
        ["sh", str(script), "diag", "-r", "1", "-j"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert "gpufleet sandbox stand-in" in result.stderr


def test_the_service_unit_runs_nv_hostengine_as_the_real_one_does():
    core = dcgm_standins("amd64")[0]
    unit = next(f for f in core.files if f.path.endswith("nvidia-dcgm.service")).content
    assert "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm" in unit
    assert "Alias=dcgm.service" in unit
