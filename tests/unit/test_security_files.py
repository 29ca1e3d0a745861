"""Findings 2, 9 and 13 (security audit): how files reach a host, run in a real shell here.

The operations' own commands are run with ``sh`` on this machine, their stdin as pyinfra
would send it, in a temporary directory standing in for the host's file system.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

from pyinfra.api import HiddenValue, StringCommand

from gpufleet.operations.payload import make_archive
from tests.operations.helpers import operation_commands

SECRET = "s3cr3t-PROXYPASS"


def run_on_host(command, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A yielded StringCommand run by sh here, with the stdin pyinfra would send."""
    return subprocess.run(
        command.get_raw_value(),
        shell=True,
        input=command.connector_arguments.get("_stdin"),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def content_commands(path: Path, text, mode: str, current=None):
    facts = {"probes.FileDigest": {f"path={path}": current}}
    commands, _ = operation_commands("files.content", facts, path=str(path), text=text, mode=mode)
    return commands


def test_finding13_hidden_secret_replaces_a_644_file_without_ever_being_644(tmp_path):
    target = tmp_path / "95gpufleet-proxy"
    target.write_text("old, no secret\n")
    target.chmod(0o644)
    old_inode = target.stat().st_ino
    text = HiddenValue(f'Acquire::http::Proxy "http://u:{SECRET}@proxy:3128";\n')
    current = {"mode": "644", "sha256": hashlib.sha256(b"old, no secret\n").hexdigest()}
    (command,) = content_commands(target, text, "600", current)
    result = run_on_host(command)
    assert result.returncode == 0, result.stderr
    assert SECRET in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # A new file took the old one's place: the 644 inode never held the secret.
    assert target.stat().st_ino != old_inode
    assert not list(tmp_path.glob("*.gpufleet-*"))


def test_finding09_file_content_is_never_in_a_command_line(tmp_path):
    target = tmp_path / "secret.conf"
    for text in (HiddenValue(SECRET), f"plain {SECRET}"):
        (command,) = content_commands(target, text, "600")
        assert SECRET not in command.get_raw_value()
        assert SECRET not in command.get_masked_value()
        assert run_on_host(command).returncode == 0
        assert SECRET in target.read_text()


def test_finding02_payload_is_checked_before_it_is_extracted(tmp_path):
    source = tmp_path / "src"
    (source / "validation").mkdir(parents=True)
    (source / "validation" / "periodic.py").write_text("print('genuine')\n")
    archive = make_archive(source)
    dest = tmp_path / "payload" / "0.1.0"
    facts = {"probes.PayloadState": {f"dest_dir={dest}, link=": {"digest": None, "link": None}}}
    commands = operation_commands("payload.directory", facts, archive=archive, dest_dir=str(dest))
    # One shell command and no upload: no temp file name a local user could pre-create (the
    # archive comes on stdin).
    (command,) = commands[0]
    assert isinstance(command, StringCommand)
    assert "pyinfra-" not in command.get_raw_value()
    tampered = command.connector_arguments["_stdin"][:-8] + "AAAAAAA\n"
    command.connector_arguments["_stdin"] = tampered
    refused = run_on_host(command, {"TMPDIR": str(tmp_path)})
    assert refused.returncode == 1
    assert "another sha256" in refused.stderr
    assert not dest.exists()
    (command,) = operation_commands(
        "payload.directory", facts, archive=archive, dest_dir=str(dest)
    )[0]
    installed = run_on_host(command, {"TMPDIR": str(tmp_path)})
    assert installed.returncode == 0, installed.stderr
    assert (dest / "validation" / "periodic.py").read_text() == "print('genuine')\n"
    assert (dest / ".gpufleet-payload").read_text().strip() == hashlib.sha256(archive).hexdigest()
    assert not list(tmp_path.glob("gpufleet.*"))  # the private directory is gone
