"""`gpufleet validate` over real SSH: a throwaway sshd on 127.0.0.1, one good and one gone host."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.commands import validate as validate_cmd
from gpufleet.report.schema import validate_results

pytestmark = pytest.mark.integration


def ssh_inventory(tmp_path: Path, hosts: dict[str, int], key: Path) -> Path:
    entries = ", ".join(
        f'("{name}", {{"ssh_hostname": "127.0.0.1", "ssh_port": {port}, "ssh_user": "root", '
        f'"ssh_key": "{key}", "ssh_known_hosts_file": "{tmp_path / "known_hosts"}"}})'
        for name, port in hosts.items()
    )
    inventory = tmp_path / "inv.py"
    inventory.write_text(f"hosts = [{entries}]\n")
    return inventory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def sshd(tmp_path):
    """A throwaway OpenSSH server on 127.0.0.1 that accepts one generated key for root."""
    if not Path("/usr/sbin/sshd").exists() or os.geteuid() != 0:
        pytest.skip("needs root and OpenSSH's server (apt-get install openssh-server)")
    for name in ("hostkey", "client"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True
        )
    shutil.copy(tmp_path / "client.pub", tmp_path / "authorized_keys")
    port = free_port()
    config = tmp_path / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path / 'hostkey'}\n"
        f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\n"
        f"StrictModes no\nPidFile {tmp_path / 'sshd.pid'}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-f", str(config), "-E", str(tmp_path / "sshd.log")]
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None, (tmp_path / "sshd.log").read_text()
        assert time.monotonic() < deadline, "sshd never answered on its port"
        time.sleep(0.05)
    yield port, tmp_path / "client"
    proc.terminate()
    proc.wait(timeout=10)


def run_files(results: Path, host: str) -> Iterator[Path]:
    """The host's run documents (a passing quick run also writes its baseline-quick.json)."""
    return (p for p in results.glob(f"{host}/*.json") if not p.name.startswith("baseline"))


def test_ssh_run_and_unreachable_host(tmp_path, sshd, capsys):
    """One reachable host over real SSH and one refusing connections: exit 3 (a host could not
    be reached), the good host's checks ran over SSH, the bad host's document says why it could
    not be validated."""
    port, key = sshd
    inventory = ssh_inventory(tmp_path, {"good": port, "gone": free_port()}, key)
    results = tmp_path / "results"
    code = validate_cmd.main(
        [
            str(inventory),
            "--results-dir",
            str(results),
            "--select",
            "os_supported or nouveau_not_loaded",
        ]
    )
    assert code == 3  # gpufleet.commands.validate: 3 = a host unreachable, none failed
    good = json.loads(next(run_files(results, "good")).read_text())
    gone = json.loads(next(run_files(results, "gone")).read_text())
    validate_results(good)
    validate_results(gone)
    assert good["target"] == f"ssh://root@127.0.0.1:{port}"
    assert [c["status"] for c in good["checks"]] == ["pass", "pass"]
    assert good["checks"][0]["figures"]["os"]  # read over SSH from the host's os-release
    assert gone["status"] == "error" and "could not reach ssh://root@127.0.0.1" in gone["run_error"]
    assert "Connection refused" in gone["run_error"]
    junit = ET.parse(next(results.glob("junit/*.xml"))).getroot()
    names = [case.get("name") for case in junit.iter("testcase")]
    assert "run" in names and "test_os_supported[good]" in names
