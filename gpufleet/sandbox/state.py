"""Where the sandbox keeps its state, its address plan, and the state.json that inventories read."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_DIR = Path(os.environ.get("GPUFLEET_SANDBOX_STATE", "/var/lib/gpufleet-sandbox"))
CACHE_DIR = Path(os.environ.get("GPUFLEET_SANDBOX_CACHE", "/var/cache/gpufleet-sandbox"))

# The contract with the stand-ins: one bridge, one /24, the gateway on .1, host N on .(10+N).
BRIDGE = "gfsb0"
PREFIX = "gfsb-"
SUBNET = "10.231.7"
GATEWAY = f"{SUBNET}.1"
NETMASK_BITS = 24
APT_PROXY_PORT = 3142
HTTP_PORT = 8631
MAX_HOSTS = 40

NO_SANDBOX = "no sandbox running: run `gpufleet sandbox up` first"


class SandboxError(RuntimeError):
    """A sandbox step failed; the message says what and how to fix it."""


def host_name(index: int) -> str:
    """Name of the N-th host (1-based), also its netns: ``host_name(1) == "gfsb-h1"``."""
    check_host_count(index)
    return f"{PREFIX}h{index}"


def host_address(index: int) -> str:
    """Address of the N-th host (1-based): ``host_address(1) == "10.231.7.11"``."""
    check_host_count(index)
    return f"{SUBNET}.{10 + index}"


def host_index(name: str) -> int:
    """Inverse of `host_name`: ``host_index("gfsb-h3") == 3``."""
    suffix = name.removeprefix(f"{PREFIX}h")
    if suffix == name or not suffix.isdigit():
        raise SandboxError(f"{name!r} is not a sandbox host name (expected {PREFIX}hN)")
    return int(suffix)


def check_host_count(count: int) -> int:
    """Refuse host counts the address plan cannot give addresses to."""
    if not 1 <= count <= MAX_HOSTS:
        raise SandboxError(f"--hosts must be between 1 and {MAX_HOSTS}, not {count}")
    return count


@dataclass
class HostState:
    """One running host as the inventory sees it."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    ssh_key: str = ""
    known_hosts: str = ""
    supervisor_pid: int | None = None
    # identifies the host's network namespace even after its name is gone (see leader.py)
    netns_inode: int | None = None
    # snapshot layers its root mounts between its own changes and the base image (snapshot.py)
    layers: list[str] = field(default_factory=list)
    # the recorded PCI listing its /sys/bus/pci/devices shows (pci_record.py); empty: the real bus
    pci_record: str = ""


@dataclass
class SandboxState:
    """Everything `up` started, so that `down` can stop it by PID and inventories can find it."""

    image: str
    os: list[str]
    gateway: str = GATEWAY
    hosts: list[HostState] = field(default_factory=list)
    nvidia_repo_url: str = ""
    nvidia_repo_key_url: str = ""
    nvidia_repo_key_fingerprint: str = ""
    pip_index_url: str = ""
    pids: dict[str, int] = field(default_factory=dict)
    kernel_release: str = ""
    slurm_controller: str = ""  # the slurmctld host's address; empty: no Slurm cluster
    notes: list[str] = field(default_factory=list)
    snapshot: str = ""  # the snapshot the hosts were brought up from; empty: bare hosts

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxState:
        hosts = [HostState(**host) for host in data.get("hosts", [])]
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "hosts"}
        return cls(hosts=hosts, **fields)


def state_file(state_dir: Path = STATE_DIR) -> Path:
    return state_dir / "state.json"


def load_state(state_dir: Path = STATE_DIR) -> SandboxState:
    """Read state.json; `SandboxError` with the fix when no sandbox is up."""
    path = state_file(state_dir)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SandboxError(f"{NO_SANDBOX} (no {path})") from None
    except json.JSONDecodeError as exc:
        raise SandboxError(
            f"{path} is not valid JSON ({exc}); run `gpufleet sandbox down` and `up` again"
        ) from None
    return SandboxState.from_dict(data)


def save_state(state: SandboxState, state_dir: Path = STATE_DIR) -> Path:
    """Write state.json atomically (write a temporary file, then rename)."""
    path = state_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(state.to_json())
    tmp.replace(path)
    return path
