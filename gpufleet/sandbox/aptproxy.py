"""The gateway's apt proxy: apt-cacher-ng, the hosts' only way to Ubuntu's (or Debian's) archive.

It runs in the foreground under its own PID with its own cache and log directories and
`ForceManaged=1`, so it fetches only from the distribution archives its remap rules know
(Debian, Ubuntu, ...) and refuses any other URL a host asks it for. Its cache survives `down`,
so packages are downloaded once per machine.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

from gpufleet.sandbox.procs import cmdline, start_detached
from gpufleet.sandbox.state import APT_PROXY_PORT, CACHE_DIR, GATEWAY, STATE_DIR, SandboxError

CONFIG_DIR = Path("/etc/apt-cacher-ng")  # the Debian package's remap rules and mirror lists


def apt_proxy_command(
    cache_dir: Path, run_dir: Path, log_dir: Path, bind: str = GATEWAY, port: int = APT_PROXY_PORT
) -> list[str]:
    """apt-cacher-ng in the foreground, bound to the gateway only, with its own directories."""
    return [
        "apt-cacher-ng",
        "-c",
        str(CONFIG_DIR),
        "ForeGround=1",
        f"Port={port}",
        f"BindAddress={bind}",
        f"CacheDir={cache_dir}",
        f"LogDir={log_dir}",
        f"PidFile={run_dir / 'apt-cacher-ng.pid'}",
        f"SocketPath={run_dir / 'apt-cacher-ng.socket'}",
        "ForceManaged=1",
        "ExThreshold=4",
        # Hosts that update within 5 min of each other get one frozen copy of an index
        # (default 27 s): fewer concurrent refreshes of one InRelease, which acng can fail.
        "FreshIndexMaxAge=300",
    ]


def wait_for_port(address: str, port: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def start_apt_proxy(state_dir: Path = STATE_DIR, cache: Path = CACHE_DIR) -> int:
    """Start apt-cacher-ng on the gateway address; return its PID once it accepts connections."""
    if shutil.which("apt-cacher-ng") is None:
        raise SandboxError(
            "apt-cacher-ng not found: apt-get install -y apt-cacher-ng "
            "(the sandbox hosts reach the OS archive only through it)"
        )
    cache_dir = cache / "apt-cacher-ng"
    run_dir = state_dir / "run"
    log_dir = state_dir / "log" / "apt-cacher-ng"
    for path in (cache_dir, run_dir, log_dir):
        path.mkdir(parents=True, exist_ok=True)
    pid = start_detached(
        apt_proxy_command(cache_dir, run_dir, log_dir), state_dir / "log" / "apt-cacher-ng.out"
    )
    answered = wait_for_port(GATEWAY, APT_PROXY_PORT)
    time.sleep(0.2)  # a second apt-cacher-ng exits at once when the port is taken
    if not cmdline(pid):
        raise SandboxError(
            f"apt-cacher-ng exited at start; is port {APT_PROXY_PORT} taken by the system's "
            "apt-cacher-ng service? Fix: systemctl disable --now apt-cacher-ng "
            f"(see {state_dir / 'log' / 'apt-cacher-ng.out'})"
        )
    if not answered:
        raise SandboxError(
            f"apt-cacher-ng (pid {pid}) does not answer on {GATEWAY}:{APT_PROXY_PORT}; "
            f"see {state_dir / 'log'}"
        )
    return pid
