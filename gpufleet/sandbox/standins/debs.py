"""Build stand-in ``.deb`` files with ``dpkg-deb --build`` (uncompressed: they are tiny)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpufleet.sandbox.standins.model import STANDIN, StandinError, StandinPackage

_SCRIPT_HEAD = f"#!/bin/sh\n# {STANDIN} maintainer script\nset -e\n"
# Every build of the same package gives the same bytes (dpkg-deb clamps times to this), so a
# caching apt proxy that keeps a .deb by its URL never serves one that no longer matches the
# rebuilt repository's checksums after the next `sandbox up`.
SOURCE_DATE_EPOCH = "1767225600"  # 2026-01-01T00:00:00Z


def build_deb(package: StandinPackage, out_dir: Path, work_dir: Path) -> Path:
    """Lay out ``package`` under ``work_dir`` and build ``out_dir/<name>_<version>_<arch>.deb``.

    Example: ``build_deb(linux_headers("6.1.0-18-amd64", "amd64"), repo, tmp)``
    """
    root = work_dir / f"{package.name}_{package.version}"
    control_dir = root / "DEBIAN"
    control_dir.mkdir(parents=True)
    doc = f"/usr/share/doc/{package.name}/README.gpufleet-standin"
    readme = (
        f"{package.name} {package.version} here is a {STANDIN}.\n"
        "It carries the real NVIDIA package's name, version and dependencies so that the\n"
        "deploy runs unchanged on the sandbox, installs no kernel module and no NVIDIA\n"
        "library, and nothing in it says that a GPU is present.\n"
    )
    size = 0
    for path, content, mode in [
        (doc, readme, 0o644),
        *((f.path, f.content, f.mode) for f in package.files),
    ]:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        target.chmod(mode)
        size += len(content.encode())
    for link, link_target in package.symlinks:
        link_path = root / link.lstrip("/")
        link_path.parent.mkdir(parents=True, exist_ok=True)
        link_path.symlink_to(link_target)
    (control_dir / "control").write_text(package.control((size + 1023) // 1024))
    for script, body in (("postinst", package.postinst), ("prerm", package.prerm)):
        if body:
            (control_dir / script).write_text(_SCRIPT_HEAD + body)
            (control_dir / script).chmod(0o755)
    deb = out_dir / package.deb_filename
    command = ["dpkg-deb", "--root-owner-group", "-Znone", "--build", str(root), str(deb)]
    try:
        subprocess.run(
            command,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH},
        )
    except FileNotFoundError as exc:
        raise StandinError(
            "dpkg-deb is missing: the sandbox needs a Debian or Ubuntu machine (dpkg has it)."
        ) from exc
    except subprocess.CalledProcessError as exc:
        raise StandinError(f"dpkg-deb failed for {package.name}: {exc.stderr.strip()}") from exc
    return deb


def build_debs(packages: Sequence[StandinPackage], out_dir: Path, work_dir: Path) -> list[Path]:
    """Build every package, a few ``dpkg-deb`` processes at a time."""
    names = [p.deb_filename for p in packages]
    if len(set(names)) != len(names):
        raise StandinError("two stand-in packages share a file name; each name/version once")
    workers = min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: build_deb(p, out_dir, work_dir), packages))
