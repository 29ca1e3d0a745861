"""The nccl-tests build command, run for real by sh against archives made here.

The archive stands in for NVIDIA's nccl-tests release: a Makefile whose build writes the
``build/*_perf`` files the real one does (no nvcc here). What is real is everything around it:
the download (curl, file://), the sha256 check in the same command, unpacking, the make
arguments, the atomic install and the clean-up.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpufleet.operations.build import _NCCL_TESTS_BUILD
from gpufleet.operations.stdin import secret_lines
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages.nccl_tests import nvcc_gencode

MAKEFILE = """\
all:
\t@echo "make args: MPI=$(MPI) MPI_HOME=$(MPI_HOME) CUDA_HOME=$(CUDA_HOME) NCCL_HOME=$(NCCL_HOME) "
\t@echo "GENCODE=$(NVCC_GENCODE)"
\t@test "$(FAIL)" != yes
\tmkdir -p build
\tprintf '#!/bin/sh\\necho all_reduce_perf\\n' > build/all_reduce_perf
\tprintf '#!/bin/sh\\necho all_gather_perf\\n' > build/all_gather_perf
"""


HOMES = ("/usr/local/cuda", "/usr")  # CUDA_HOME, NCCL_HOME as the stage passes them


def archive(tmp_path: Path, makefile: str = MAKEFILE) -> tuple[Path, str]:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        body = makefile.encode()
        info = tarfile.TarInfo("nccl-tests-2.17.6/Makefile")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    path = tmp_path / "v2.17.6.tar.gz"
    path.write_bytes(data.getvalue())
    return path, hashlib.sha256(data.getvalue()).hexdigest()


def build(url: str, sha: str, prefix: Path, tmp: Path, gencode: str = "", *more: str, **env: str):
    """The command as the operation runs it: arguments, and the URL on stdin (no proxy)."""
    args = [sha, str(prefix), *HOMES, gencode, *more]
    return subprocess.run(
        ["sh", "-c", _NCCL_TESTS_BUILD, "gpufleet-nccl-tests", *args],
        input=secret_lines(url=url),
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp), **env},
        timeout=60,
    )


@pytest.fixture
def tmpdir_for_build(tmp_path: Path) -> Path:
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def test_a_verified_archive_is_built_without_mpi_and_installed(tmp_path, tmpdir_for_build):
    source, sha = archive(tmp_path)
    prefix = tmp_path / "opt" / "nccl-tests" / sha[:12]
    gencode = "-gencode=arch=compute_90,code=sm_90"
    result = build(f"file://{source}", sha, prefix, tmpdir_for_build, gencode)
    assert result.returncode == 0, result.stderr
    assert "MPI=0 MPI_HOME= CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr" in result.stdout
    assert f"GENCODE={gencode}" in result.stdout
    assert sorted(p.name for p in (prefix / "bin").iterdir()) == [
        "all_gather_perf",
        "all_reduce_perf",
    ]
    assert list(tmpdir_for_build.iterdir()) == []  # the private build directory is gone
    assert not prefix.with_name(prefix.name + ".gpufleet-new").exists()


def test_with_mpi_home_the_mpi_build_is_made_into_its_own_prefix(tmp_path, tmpdir_for_build):
    source, sha = archive(tmp_path)
    mpi = tmp_path / "usr" / "lib" / "x86_64-linux-gnu" / "openmpi"
    (mpi / "include").mkdir(parents=True)
    (mpi / "include" / "mpi.h").write_text("/* libopenmpi-dev */\n")
    single = tmp_path / "opt" / "nccl-tests" / sha[:12]
    assert build(f"file://{source}", sha, single, tmpdir_for_build).returncode == 0
    prefix = single.with_name(single.name + "-mpi")
    result = build(f"file://{source}", sha, prefix, tmpdir_for_build, "", str(mpi))
    assert result.returncode == 0, result.stderr
    assert f"make args: MPI=1 MPI_HOME={mpi} CUDA_HOME=/usr/local/cuda" in result.stdout
    assert (prefix / "bin" / "all_reduce_perf").exists()
    assert (single / "bin" / "all_reduce_perf").exists()  # the single-host build stays


def test_an_mpi_build_without_mpi_h_stops_before_make(tmp_path, tmpdir_for_build):
    source, sha = archive(tmp_path)
    prefix = tmp_path / "opt" / "nccl-tests" / "x-mpi"
    result = build(f"file://{source}", sha, prefix, tmpdir_for_build, "", str(tmp_path / "none"))
    assert result.returncode == 1
    assert "include/mpi.h (libopenmpi-dev); not building nccl-tests with MPI" in result.stderr
    assert "make args" not in result.stdout
    assert not prefix.exists()


def test_mpi_home_and_packages_per_release():
    from pyinfra.api import OperationError

    from gpufleet.stages.nccl_tests import mpi_dir, mpi_home, mpi_packages

    assert mpi_home("aarch64") == "/usr/lib/aarch64-linux-gnu/openmpi"
    with pytest.raises(OperationError, match="ppc64le"):
        mpi_home("ppc64le")
    assert mpi_packages("debian", "12.5") == (
        ["openmpi-bin=4.1.4-3+b1", "libopenmpi-dev=4.1.4-3+b1"],
        True,
    )
    assert mpi_packages("ubuntu", "22.04") == (["openmpi-bin", "libopenmpi-dev"], False)
    assert mpi_dir("/opt/gpufleet/nccl-tests/38974e703421").endswith("38974e703421-mpi")


def test_a_mismatching_archive_is_never_built_and_leaves_nothing(tmp_path, tmpdir_for_build):
    source, sha = archive(tmp_path)
    prefix = tmp_path / "opt" / "nccl-tests" / "x"
    wrong = "0" * 64
    result = build(f"file://{source}", wrong, prefix, tmpdir_for_build)
    assert result.returncode == 1
    assert f"has sha256 {sha}, expected {wrong};" in result.stderr
    assert "not building it" in result.stderr
    assert str(source) not in result.stderr  # the URL (it may carry a login) is not printed
    assert "Fix: check nccl_tests_url and nccl_tests_sha256" in result.stderr
    assert "make args" not in result.stdout
    assert not prefix.exists()
    assert list(tmpdir_for_build.iterdir()) == []


def test_a_failed_build_keeps_the_installed_version(tmp_path, tmpdir_for_build):
    source, sha = archive(tmp_path)
    prefix = tmp_path / "opt" / "nccl-tests" / sha[:12]
    assert build(f"file://{source}", sha, prefix, tmpdir_for_build).returncode == 0
    before = (prefix / "bin" / "all_reduce_perf").read_text()
    failed = build(f"file://{source}", sha, prefix, tmpdir_for_build, FAIL="yes")
    assert failed.returncode != 0
    assert (prefix / "bin" / "all_reduce_perf").read_text() == before
    assert list(tmpdir_for_build.iterdir()) == []


def test_the_build_directory_is_private_to_root(tmp_path, tmpdir_for_build):
    # A Makefile that reports the mode of the directory it is built in.
    source, sha = archive(tmp_path, "all:\n\t@stat -c 'mode=%a' ..\n\t@false\n")
    result = build(f"file://{source}", sha, tmp_path / "p", tmpdir_for_build)
    assert "mode=700" in result.stdout


def test_a_bad_nccl_tests_sha256_is_refused_before_any_host_changes():
    with pytest.raises(SpecError, match="nccl_tests_sha256 = 'abc' is not a lower-case sha256"):
        NodeSpec.from_host_data({"nccl_tests_sha256": "abc"})


def test_gencode_flags_follow_the_hosts_gpus():
    class _Plan:
        class state:
            gpus = [type("D", (), {"device_id": "2330"})()] * 8

    assert nvcc_gencode(_Plan()) == "-gencode=arch=compute_90,code=sm_90"  # type: ignore[arg-type]
