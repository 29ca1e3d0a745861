"""Tools gpufleet builds from source on the host: nccl-tests, verified and installed atomically."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import HiddenValue, OperationError, QuoteString, StringCommand, operation

from gpufleet.operations.probes import PathExists
from gpufleet.operations.stdin import FETCH, PRIVATE_TMP, SECRET_ENV, secret_lines

# The whole build in one command, so that the download is checked in the command that uses it:
# a root-only directory made for this run (stdin.PRIVATE_TMP: mktemp -d, mode 0700), the
# archive fetched into it (the URL and proxy arrive on stdin: they may carry credentials), its
# sha256 checked, then unpacked, built and installed into PREFIX.gpufleet-new before one rename
# makes it PREFIX. A failed step leaves PREFIX as it was; the trap removes the rest.
# Arguments: SHA256 PREFIX CUDA_HOME NCCL_HOME NVCC_GENCODE (may be empty) [MPI_HOME: set, the
# build is nccl-tests' MPI one, `make MPI=1 MPI_HOME=...` as its README says]; stdin: proxy, "",
# URL (stdin.secret_lines).
_NCCL_TESTS_BUILD = (
    "set -eu\n"
    + PRIVATE_TMP
    + "sha=$1 prefix=$2 cuda_home=$3 nccl_home=$4 gencode=$5 mpi_home=${6:-}\n"
    + 'trap \'rm -rf "$tmp" "$prefix.gpufleet-new"\' EXIT\n'
    + SECRET_ENV
    + "name=source.tar.gz\n"
    + FETCH
    + r"""got=$(sha256sum < "$tmp/source.tar.gz" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  echo "gpufleet: the nccl-tests source at nccl_tests_url has sha256 $got, expected $sha;" \
    "not building it. Fix: check nccl_tests_url and nccl_tests_sha256." >&2
  exit 1
fi
mkdir "$tmp/src"
tar -xzf "$tmp/source.tar.gz" -C "$tmp/src" --strip-components=1 --no-same-owner
if [ -n "$mpi_home" ]; then
  [ -f "$mpi_home/include/mpi.h" ] || { echo "gpufleet: no $mpi_home/include/mpi.h" \
    "(libopenmpi-dev); not building nccl-tests with MPI." >&2; exit 1; }
  set -- MPI=1 "MPI_HOME=$mpi_home" "CUDA_HOME=$cuda_home" "NCCL_HOME=$nccl_home"
else
  set -- MPI=0 "CUDA_HOME=$cuda_home" "NCCL_HOME=$nccl_home"
fi
[ -z "$gencode" ] || set -- "$@" "NVCC_GENCODE=$gencode"
make -C "$tmp/src" -j"$(nproc)" "$@"
rm -rf "$prefix.gpufleet-new"
mkdir -p "$prefix.gpufleet-new/bin"
cp "$tmp"/src/build/*_perf "$prefix.gpufleet-new/bin/"
rm -rf "$prefix"
mv "$prefix.gpufleet-new" "$prefix"
"""
)


@operation()
def nccl_tests(
    url: str | HiddenValue,
    sha256: str,
    prefix: str,
    cuda_home: str = "/usr/local/cuda",
    nccl_home: str = "/usr",
    nvcc_gencode: str = "",
    proxy: str | HiddenValue | None = None,
    mpi_home: str = "",
):
    """
    Build NVIDIA's nccl-tests (without MPI, for one host; with ``mpi_home``, its MPI build for
    runs across hosts) from a source archive whose sha256 is pinned, into ``prefix/bin``
    (``all_reduce_perf`` and the other ``*_perf`` binaries), unless
    ``prefix/bin/all_reduce_perf`` is already there.

    + url: the source archive (a release tarball, or a mirror of it; sent on stdin)
    + sha256: the archive's sha256; a mismatch stops the build and removes the download
    + prefix: versioned install directory, e.g. ``/opt/gpufleet/nccl-tests/2.17.6``
    + cuda_home: the system CUDA toolkit; nccl_home: where libnccl-dev put NCCL
    + nvcc_gencode: ``-gencode=...`` flags for the host's GPUs (empty: nccl-tests' default)
    + proxy: HTTP proxy for the download (sent on stdin)
    + mpi_home: the MPI installation (``include/mpi.h``, ``lib/libmpi.so``), e.g. Debian and
      Ubuntu's OpenMPI ``/usr/lib/x86_64-linux-gnu/openmpi``; empty: no MPI

    **Example:**

    .. code:: python

        nccl_tests(
            url="https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz",
            sha256="38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0",
            prefix="/opt/gpufleet/nccl-tests/2.17.6",
        )
    """
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise OperationError(f"nccl_tests: sha256 {sha256!r} is not 64 lower-case hex digits")
    if mpi_home and not mpi_home.startswith("/"):
        raise OperationError(f"nccl_tests: mpi_home {mpi_home!r} is not an absolute path")
    if host.get_fact(PathExists, path=f"{prefix}/bin/all_reduce_perf"):
        host.noop(f"nccl-tests is built in {prefix}")
        return
    yield StringCommand(
        "sh",
        "-c",
        QuoteString(_NCCL_TESTS_BUILD),
        "gpufleet-nccl-tests",
        QuoteString(sha256),
        QuoteString(prefix),
        QuoteString(cuda_home),
        QuoteString(nccl_home),
        QuoteString(nvcc_gencode),
        QuoteString(mpi_home),
        _stdin=secret_lines(proxy=proxy, url=url),
    )
