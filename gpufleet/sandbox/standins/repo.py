"""The sandbox's signed flat apt repository of stand-in NVIDIA packages.

Same layout as NVIDIA's ``.../compute/cuda/repos/<distro>/<arch>/``: ``.deb`` files, ``Packages``
(by ``dpkg-scanpackages`` from Debian's dpkg-dev), ``Packages.gz``, ``Release``, ``InRelease``,
``Release.gpg`` and the public key, here ``gpufleet-sandbox-standin.pub`` (armored, like NVIDIA's
``3bf863cc.pub``) and ``gpufleet-sandbox-standin.gpg`` (binary, for ``Signed-By``).
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

from gpufleet.sandbox.standins.catalog import standin_branches, standin_packages
from gpufleet.sandbox.standins.debs import build_debs
from gpufleet.sandbox.standins.model import STANDIN, StandinError
from gpufleet.sandbox.standins.signing import throwaway_key

KEY_BASENAME = "gpufleet-sandbox-standin"
# NVIDIA's CUDA repository pin file matches `release l=NVIDIA CUDA`: keep the label so a deploy
# that installs that pin file treats the stand-in repository as it treats NVIDIA's.
RELEASE_ORIGIN = "NVIDIA"
RELEASE_LABEL = "NVIDIA CUDA"


@dataclass(frozen=True)
class RepoInfo:
    """Where the built repository is, its key files and the signing key's fingerprint."""

    path: Path
    key_file: Path
    fingerprint: str
    keyring_file: Path | None = None
    packages: tuple[str, ...] = field(default=(), compare=False)  # "name=version", sorted
    build_s: float = field(default=0.0, compare=False)


def build_nvidia_repo(
    www: Path,
    *,
    repo_distro: str,
    repo_arch: str,
    kernel_release: str,
    branches: Sequence[int] | None = None,
    tf_version: str = "2.21.0",
) -> RepoInfo:
    """Build ``www/nvidia/<repo_distro>/<repo_arch>/`` afresh, signed with a new throwaway key.

    Example::

        info = build_nvidia_repo(Path("/var/lib/gpufleet-sandbox/www"), repo_distro="ubuntu2204",
                                 repo_arch="x86_64", kernel_release=os.uname().release)
        info.fingerprint  # 40 hex digits; info.key_file is the armored public key
    """
    started = time.monotonic()
    if branches is None:
        branches = standin_branches(repo_distro)
    if not branches:
        raise StandinError("branches is empty. Fix: pass the driver branches to stand in for.")
    packages = standin_packages(
        repo_distro=repo_distro,
        repo_arch=repo_arch,
        kernel_release=kernel_release,
        branches=branches,
        tf_version=tf_version,
    )
    final = www / "nvidia" / repo_distro / repo_arch
    final.parent.mkdir(parents=True, exist_ok=True)
    for leftover in final.parent.glob(f".{repo_arch}-*"):  # from a build that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    building = Path(tempfile.mkdtemp(prefix=f".{repo_arch}-", dir=final.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="gfsb-debs-") as work:
            build_debs(packages, building, Path(work))
        _write_indexes(building)
        release = building / "Release"
        release.write_text(release_text(building, repo_arch))
        with throwaway_key() as key:
            key.sign_release(release)
            keyring = building / f"{KEY_BASENAME}.gpg"
            armored = building / f"{KEY_BASENAME}.pub"
            key.export(keyring, armored)
            fingerprint = key.fingerprint
        building.chmod(0o755)
        if final.exists():
            shutil.rmtree(final)
        building.rename(final)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return RepoInfo(
        path=final,
        key_file=final / f"{KEY_BASENAME}.pub",
        fingerprint=fingerprint,
        keyring_file=final / f"{KEY_BASENAME}.gpg",
        packages=tuple(sorted(f"{p.name}={p.version}" for p in packages)),
        build_s=time.monotonic() - started,
    )


def _write_indexes(repo: Path) -> None:
    """``Packages`` by dpkg-scanpackages (every version kept), and ``Packages.gz``."""
    command = ["dpkg-scanpackages", "--multiversion", ".", "/dev/null"]
    try:
        done = subprocess.run(command, cwd=repo, capture_output=True, check=True)
    except FileNotFoundError as exc:
        raise StandinError("dpkg-scanpackages is missing. Fix: apt-get install dpkg-dev") from exc
    except subprocess.CalledProcessError as exc:
        raise StandinError(f"dpkg-scanpackages failed: {exc.stderr.decode().strip()}") from exc
    (repo / "Packages").write_bytes(done.stdout)
    (repo / "Packages.gz").write_bytes(gzip.compress(done.stdout, compresslevel=6, mtime=0))


def release_text(repo: Path, repo_arch: str) -> str:
    """The flat repository's ``Release``: origin, label, date and the indexes' checksums."""
    indexes = [repo / "Packages", repo / "Packages.gz"]
    lines = [
        f"Origin: {RELEASE_ORIGIN}",
        f"Label: {RELEASE_LABEL}",
        f"Architecture: {repo_arch}",
        f"Date: {formatdate(usegmt=True)}",
        f"Description: {STANDIN} of NVIDIA's CUDA repository; nothing here drives a GPU",
    ]
    for title, algorithm in (
        ("MD5Sum", "md5"),
        ("SHA1", "sha1"),
        ("SHA256", "sha256"),
        ("SHA512", "sha512"),
    ):
        lines.append(f"{title}:")
        for index in indexes:
            data = index.read_bytes()
            digest = hashlib.new(algorithm, data).hexdigest()
            lines.append(f" {digest} {len(data):>16} {index.name}")
    return "\n".join(lines) + "\n"
