"""The sandbox's wheel index (PEP 503) and the HTTP server that serves it."""

from __future__ import annotations

import hashlib
import re
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpufleet.sandbox.serve import start_server, stop_server
from gpufleet.sandbox.state import SandboxError
from gpufleet.sandbox.wheelhouse import build_wheelhouse, normalize, write_simple_index
from tests.ports import serve_www
from tests.wheels import local_index

LINK = re.compile(r'<a href="([^"]+)">([^<]+)</a>')


def make_wheel(folder: Path, name: str) -> Path:
    """A minimal wheel file: the index only reads its name and bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    dist = "-".join(name.split("-")[:2])
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {dist}\n")
    return path


def test_normalize_follows_pep_503() -> None:
    assert normalize("Typing_Extensions") == "typing-extensions"
    assert normalize("zope.interface") == "zope-interface"
    assert normalize("A__b-.C") == "a-b-c"


def test_simple_index_links_every_wheel_with_its_sha256(tmp_path: Path) -> None:
    wheels_dir = tmp_path / "www" / "wheels"
    wheels = [
        make_wheel(wheels_dir, "typing_extensions-4.16.0-py3-none-any.whl"),
        make_wheel(wheels_dir, "six-1.16.0-py2.py3-none-any.whl"),
        make_wheel(wheels_dir, "six-1.17.0-py2.py3-none-any.whl"),
    ]
    simple = write_simple_index(tmp_path / "www" / "simple", wheels, tmp_path / "hashes")
    root_links = LINK.findall((simple / "index.html").read_text())
    assert root_links == [("six/", "six"), ("typing-extensions/", "typing-extensions")]
    six_links = LINK.findall((simple / "six" / "index.html").read_text())
    assert [text for _, text in six_links] == [w.name for w in wheels[1:]]
    for href, text in six_links:
        target, _, fragment = href.partition("#sha256=")
        served = (simple / "six" / target).resolve()
        assert served == (wheels_dir / text).resolve()
        assert fragment == hashlib.sha256(served.read_bytes()).hexdigest()


def test_index_refuses_files_that_are_not_wheels(tmp_path: Path) -> None:
    bad = make_wheel(tmp_path / "wheels", "six.tar.gz")
    with pytest.raises(SandboxError, match="not a wheel file name"):
        write_simple_index(tmp_path / "simple", [bad])


def test_bad_python_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"python_version '310' is not like '3\.10'"):
        build_wheelhouse(tmp_path / "www", tmp_path / "cache", python_version="310")


def test_wheelhouse_from_an_index_is_cached_served_and_usable_by_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip download through a local index (tests/wheels.py: a wheel built here, no PyPI), once;
    then the wheelhouse's own server gives pip the same wheel."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    with local_index(tmp_path / "upstream", monkeypatch) as (_, wheel):
        first = build_wheelhouse(www, cache, packages=("gpufleet-tiny==1.0",), bootstrap=())
        assert first.downloaded
        assert [w.name for w in first.wheels] == [wheel.name]
    # The index is gone: the second build can only come from the cache.
    again = build_wheelhouse(www, cache, packages=("gpufleet-tiny==1.0",), bootstrap=())
    assert not again.downloaded and [w.name for w in again.wheels] == [wheel.name]
    pid, port = serve_www(www, tmp_path / "http.log")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--isolated", "--no-deps",
             "--index-url", f"http://127.0.0.1:{port}/simple", "--dest", str(tmp_path / "got"),
             "gpufleet-tiny==1.0"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "got" / wheel.name).read_bytes() == wheel.read_bytes()
    finally:
        assert stop_server(pid)
    assert "GET /simple/gpufleet-tiny/" in (tmp_path / "http.log").read_text()


def test_server_on_a_taken_port_fails_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SandboxError, match="Address already in use"):
            start_server(tmp_path / "www", "127.0.0.1", port, tmp_path / "http.log")


def test_stop_server_refuses_a_pid_that_is_not_the_server() -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(SandboxError, match="is not the sandbox's HTTP server"):
            stop_server(other.pid)
        assert other.poll() is None
    finally:
        other.terminate()
        other.wait(timeout=5)
    assert stop_server(other.pid) is False  # gone: nothing to stop
