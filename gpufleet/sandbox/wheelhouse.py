"""The sandbox's local pip index: wheels for the hosts' Python, and a PEP 503 index over them.

``pip download`` fetches binary wheels for the hosts' interpreter (not this one) into a cache
that survives ``sandbox down``: the lines of the deploy's hashed lock whose markers hold on the
hosts, with ``--require-hashes``, so the index serves exactly the locked files. The index under
``www/simple`` points at copies under ``www/wheels`` with ``#sha256=`` fragments, so hosts
install TensorFlow without reaching out.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.matrix.locks import LockError, parse_lock
from gpufleet.sandbox.state import SandboxError

# The manylinux tags TensorFlow's and numpy's x86_64 wheels carry; pip also accepts the older
# manylinux tags each one implies.
DEFAULT_PLATFORMS = (
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
)
# A fresh venv on a host upgrades these first.
BOOTSTRAP = ("pip", "setuptools", "wheel")
_STAMP = ".gpufleet-wheelhouse.json"


@dataclass(frozen=True)
class Wheelhouse:
    """What `build_wheelhouse` did: the index, the wheels, and the seconds each step took."""

    index: Path
    wheels: tuple[Path, ...]
    download_s: float
    index_s: float
    downloaded: bool


def ensure_wheelhouse(
    www: Path,
    cache: Path,
    *,
    python_version: str = "3.10",
    packages: Sequence[str] = (),
    lock_text: str | None = None,
    platforms: Sequence[str] = DEFAULT_PLATFORMS,
) -> Path:
    """Download (once) and index wheels of ``packages`` for the hosts; return ``www/simple``.

    Example: ``ensure_wheelhouse(STATE / "www", CACHE / "wheelhouse", python_version="3.10")``
    """
    return build_wheelhouse(
        www,
        cache,
        python_version=python_version,
        packages=packages,
        lock_text=lock_text,
        platforms=platforms,
    ).index


def build_wheelhouse(
    www: Path,
    cache: Path,
    *,
    python_version: str = "3.10",
    packages: Sequence[str] = (),
    lock_text: str | None = None,
    platforms: Sequence[str] = DEFAULT_PLATFORMS,
    bootstrap: Sequence[str] = BOOTSTRAP,
) -> Wheelhouse:
    """`ensure_wheelhouse` with timings: skips pip when the same request is already cached.

    ``lock_text`` (a hashed lock, gpufleet/matrix/locks) is downloaded with ``--require-hashes``;
    ``packages`` and ``bootstrap`` are plain requirements.
    """
    if not re.fullmatch(r"3\.\d+", python_version):
        raise SandboxError(
            f"python_version {python_version!r} is not like '3.10'. Fix: pass the hosts' Python."
        )
    request = {
        "python_version": python_version,
        "packages": sorted(packages),
        "lock_sha256": hashlib.sha256((lock_text or "").encode()).hexdigest(),
        "platforms": sorted(platforms),
        "bootstrap": sorted(bootstrap),
    }
    key = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]
    cache.mkdir(parents=True, exist_ok=True)
    stamp = cache / f"{_STAMP}.{key}"
    started = time.monotonic()
    downloaded = not _cached(stamp, cache)
    if downloaded:
        if lock_text is not None:
            hashed = cache / f".gpufleet-lock.{key}.txt"
            hashed.write_text(host_lock(lock_text, python_version, platforms))
            _pip_download(
                cache,
                python_version,
                ["--require-hashes", "--no-deps", "-r", str(hashed)],
                platforms,
            )
        if packages or bootstrap:
            _pip_download(cache, python_version, [*packages, *bootstrap], platforms)
        files = sorted(p.name for p in cache.glob("*.whl"))
        stamp.write_text(json.dumps({"request": request, "wheels": files}, indent=1))
    download_s = time.monotonic() - started
    started = time.monotonic()
    wheels = _publish(cache, www / "wheels")
    index = write_simple_index(www / "simple", wheels, cache)
    return Wheelhouse(index, tuple(wheels), download_s, time.monotonic() - started, downloaded)


def host_lock(lock_text: str, python_version: str, platforms: Sequence[str]) -> str:
    """The lock's pins whose markers hold on the hosts (CPython ``python_version`` on Linux, the
    machine of ``platforms``), each with its hashes: pip download judges markers by this
    machine's interpreter, not the hosts'."""
    from packaging.markers import Marker

    machine = "aarch64" if any(p.endswith("aarch64") for p in platforms) else "x86_64"
    environment = {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
    }
    try:
        pins = parse_lock(lock_text)
    except LockError as exc:
        raise SandboxError(f"the wheelhouse's lock: {exc}") from None
    lines = []
    for pin in pins:
        if pin.marker and not Marker(pin.marker).evaluate(environment):
            continue
        hashes = " ".join(f"--hash=sha256:{digest}" for digest in pin.hashes)
        lines.append(f"{pin.name}=={pin.version} {hashes}")
    return "\n".join(lines) + "\n"


def _cached(stamp: Path, cache: Path) -> bool:
    try:
        wheels = json.loads(stamp.read_text())["wheels"]
    except (OSError, ValueError, KeyError):
        return False
    return bool(wheels) and all((cache / name).is_file() for name in wheels)


def _pip_download(
    cache: Path, python_version: str, requirements: Sequence[str], platforms: Sequence[str]
) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--quiet",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        *(arg for platform in platforms for arg in ("--platform", platform)),
        "--dest",
        str(cache),
        *requirements,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxError(
            f"pip download for Python {python_version} failed (exit {done.returncode}):\n"
            f"{done.stderr.strip()[-2000:]}\nFix: check that PyPI is reachable and that every "
            f"package has wheels for cp{python_version.replace('.', '')} on {', '.join(platforms)}."
        )


def _publish(cache: Path, wheels_dir: Path) -> list[Path]:
    """Hard-link (or copy) every cached wheel into ``www/wheels``; drop wheels no longer cached."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    cached = {p.name: p for p in cache.glob("*.whl")}
    for stale in wheels_dir.glob("*.whl"):
        if stale.name not in cached:
            stale.unlink()
    out = []
    for name, source in sorted(cached.items()):
        target = wheels_dir / name
        if not (target.exists() and target.stat().st_size == source.stat().st_size):
            target.unlink(missing_ok=True)
            try:
                os.link(source, target)
            except OSError:  # another file system
                shutil.copy2(source, target)
        out.append(target)
    return out


def normalize(name: str) -> str:
    """PEP 503 normalized name: ``normalize("Typing_Extensions") == "typing-extensions"``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def write_simple_index(
    simple: Path, wheels: Sequence[Path], hash_cache: Path | None = None
) -> Path:
    """Write a PEP 503 index of ``wheels`` (which sit in ``simple/../wheels``); return ``simple``.

    Hashes are remembered in ``hash_cache`` (by name, size and mtime) so re-indexing is quick.
    """
    by_project: dict[str, list[Path]] = defaultdict(list)
    for wheel in wheels:
        if not wheel.name.endswith(".whl") or wheel.name.count("-") < 4:
            raise SandboxError(f"{wheel.name} is not a wheel file name (PEP 427). Remove it.")
        by_project[normalize(wheel.name.split("-", 1)[0])].append(wheel)
    if hash_cache is not None:
        hash_cache.mkdir(parents=True, exist_ok=True)
    if simple.exists():
        shutil.rmtree(simple)
    simple.mkdir(parents=True)
    for project, files in sorted(by_project.items()):
        links = []
        for wheel in sorted(files, key=lambda p: p.name):
            digest = _sha256(wheel, hash_cache)
            href = f"../../wheels/{wheel.name}#sha256={digest}"
            links.append(f'    <a href="{html.escape(href)}">{html.escape(wheel.name)}</a><br/>')
        (simple / project).mkdir()
        (simple / project / "index.html").write_text(_page(f"Links for {project}", links))
    root = [f'    <a href="{p}/">{p}</a><br/>' for p in sorted(by_project)]
    (simple / "index.html").write_text(_page("Simple index (gpufleet sandbox wheelhouse)", root))
    return simple


def _page(title: str, links: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{html.escape(title)}</title></head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        + "\n".join(links)
        + "\n  </body>\n</html>\n"
    )


def _sha256(path: Path, hash_cache: Path | None) -> str:
    info = path.stat()
    memo = hash_cache / f".{path.name}.sha256" if hash_cache else None
    tag = f"{info.st_size}:{info.st_mtime_ns}"
    if memo is not None and memo.is_file():
        remembered_tag, _, digest = memo.read_text().partition(" ")
        if remembered_tag == tag and len(digest) == 64:
            return digest
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    digest = sha.hexdigest()
    if memo is not None:
        memo.write_text(f"{tag} {digest}")
    return digest
