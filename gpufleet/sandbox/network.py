"""The sandbox's network: one bridge on the gateway address, one network namespace per host.

Hosts get no default route and the machine does no NAT for them, so a host can reach the
gateway's address (10.231.7.1) and nothing else; OS packages come through the gateway's apt
proxy and everything else from the gateway's HTTP server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpufleet.sandbox.state import BRIDGE, GATEWAY, NETMASK_BITS, PREFIX, SandboxError

NETNS_DIR = Path("/run/netns")


def veth_name(host: str) -> str:
    """The root-namespace end of a host's veth pair: ``gfsb-h1`` -> ``gfsb-h1v``."""
    name = f"{host}v"
    if len(name) > 15:
        raise SandboxError(f"interface name {name!r} is longer than Linux's 15 characters")
    return name


def bridge_commands(bridge: str = BRIDGE, gateway: str = GATEWAY) -> list[list[str]]:
    """Create the bridge that carries the gateway address."""
    return [
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{gateway}/{NETMASK_BITS}", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ]


def host_network_commands(host: str, address: str, bridge: str = BRIDGE) -> list[list[str]]:
    """Create a host's namespace, a veth pair into it (``eth0`` inside) and its address."""
    veth = veth_name(host)
    return [
        ["ip", "netns", "add", host],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host],
        ["ip", "link", "set", veth, "master", bridge, "up"],
        ["ip", "-n", host, "addr", "add", f"{address}/{NETMASK_BITS}", "dev", "eth0"],
        ["ip", "-n", host, "link", "set", "eth0", "up"],
        ["ip", "-n", host, "link", "set", "lo", "up"],
    ]


def _run(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"`{' '.join(command)}` failed: {proc.stderr.strip()}")


def create_bridge() -> None:
    for command in bridge_commands():
        _run(command)


def create_host_network(host: str, address: str) -> None:
    for command in host_network_commands(host, address):
        _run(command)


def sandbox_namespaces() -> list[str]:
    """Network namespaces of the sandbox, running or left over from a crash."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))


def sandbox_links() -> list[str]:
    """Interfaces in the root namespace that belong to the sandbox (the bridge, veth ends)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        # "12: gfsb-h1v@if2: <...>" -> "gfsb-h1v"
        name = line.split(":", 2)[1].strip().split("@", 1)[0]
        if name.startswith(PREFIX) or name == BRIDGE:
            names.append(name)
    return names


def remove_network() -> list[str]:
    """Delete every sandbox namespace, veth and the bridge; return what was removed.

    Deleting a namespace deletes the veth ends inside it, and with them their peers.
    """
    removed = []
    for ns in sandbox_namespaces():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        removed.append(f"netns {ns}")
    for link in sandbox_links():
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        removed.append(f"link {link}")
    return removed
