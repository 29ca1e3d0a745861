"""Wheels built by the tests, and a local pip index that serves them, so that nothing in the
unit tier reaches PyPI (issue 30, D20)."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpufleet.sandbox.serve import stop_server
from gpufleet.sandbox.wheelhouse import write_simple_index
from tests.ports import serve_www

TINY = "gpufleet_tiny"


def tiny_wheel(folder: Path, version: str = "1.0") -> Path:
    """A real, installable wheel of one module, ``gpufleet_tiny`` (``VALUE = 42``)."""
    dist = f"{TINY}-{version}.dist-info"
    files = {
        f"{TINY}.py": b"VALUE = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {TINY}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: gpufleet-test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{TINY}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextmanager
def local_index(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index of `tiny_wheel` on loopback, and pip (in this process's children) told
    to use only it: no pip.conf, find-links or extra index of this machine. Yields the index
    URL and the wheel it serves."""
    wheel = tiny_wheel(folder / "wheels")
    write_simple_index(folder / "simple", [wheel], folder / "hashes")
    pid, port = serve_www(folder, folder / "http.log")
    url = f"http://127.0.0.1:{port}/simple"
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    try:
        yield url, wheel
    finally:
        assert stop_server(pid)
