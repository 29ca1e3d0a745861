"""Fixtures that bring a real sandbox fleet up for a test module and always take it down."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.sandbox.image import MARKER, images_dir
from gpufleet.sandbox.state import STATE_DIR, SandboxState, load_state

REPO = Path(__file__).resolve().parents[2]
NEEDED_TOOLS = ("systemd-nspawn", "debootstrap", "apt-cacher-ng")


def sandbox_skip_reason() -> str | None:
    """Why the sandbox cannot run here, or None. Only a missing root or tool is a reason."""
    if os.geteuid() != 0:
        return "the sandbox fleet needs root (network namespaces, mounts, systemd-nspawn)"
    missing = [tool for tool in NEEDED_TOOLS if shutil.which(tool) is None]
    if missing:
        return (
            f"sandbox tools missing: {', '.join(missing)} "
            "(apt-get install -y systemd-container debootstrap apt-cacher-ng)"
        )
    return None


@pytest.fixture(autouse=True)
def _needs_sandbox_tools() -> None:
    reason = sandbox_skip_reason()
    if reason:
        pytest.skip(reason)


def gpufleet(
    *args: str, timeout: float = 1800, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real `gpufleet` CLI in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"gpufleet {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@dataclass
class Sandbox:
    """A running sandbox as the tests see it, with the figures measured while bringing it up."""

    state: SandboxState
    up_s: float
    image_existed: bool

    def ssh(
        self, host: int | str, command: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` on a host as root over SSH, checking its host key strictly."""
        address = self.address(host)
        return subprocess.run(
            [
                "ssh",
                "-i",
                str(STATE_DIR / "id_ed25519"),
                "-o",
                f"UserKnownHostsFile={STATE_DIR / 'known_hosts'}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=3",
                f"root@{address}",
                command,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def address(self, host: int | str) -> str:
        if isinstance(host, int):
            return self.state.hosts[host].address
        return next(h.address for h in self.state.hosts if h.name == host)


# Identifies one boot of a host: systemd-nspawn mounts a fresh random boot ID into the container
# at each start. (PID 1's start time cannot: the sandbox's time namespace restarts the boot
# clock at each boot, so PID 1 starts at about the same tick every time.)
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


@contextmanager
def running_sandbox(hosts: int, *, standins: bool, image: str | None = None) -> Iterator[Sandbox]:
    """`gpufleet sandbox up` (on `image`, default the sandbox's choice), yield, then `gpufleet
    sandbox down` whatever happened."""
    image_existed = any(images_dir().glob(f"*/{MARKER}"))
    args = ["sandbox", "up", "--hosts", str(hosts)] + ([] if standins else ["--no-standins"])
    args += ["--image", image] if image else []
    gpufleet("sandbox", "down", timeout=300)  # a sandbox left by someone else is not timed
    started = time.monotonic()
    try:
        gpufleet(*args)
        up_s = time.monotonic() - started
        yield Sandbox(load_state(), up_s, image_existed)
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)
