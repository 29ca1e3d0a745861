"""The sandbox's network: one bridge on the gateway address, one network namespace per host.

Hosts get no default route and the machine does no NAT for them, so a host can reach the
gateway's address (10.231.7.1) and nothing else; OS packages come through the gateway's apt
proxy and everything else from the gateway's HTTP server.

Every link and namespace a sandbox creates carries an interface alias naming its state
directory (the bridge and veth ends directly, a namespace on its loopback), so teardown removes
only what this sandbox made, never another's that happens to share the ``gfsb-`` prefix.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from gpufleet.sandbox.state import (
    BRIDGE,
    GATEWAY,
    NETMASK_BITS,
    PREFIX,
    SUBNET,
    SandboxError,
)

SANDBOX_NETWORK = ipaddress.ip_network(f"{SUBNET}.0/{NETMASK_BITS}")
TAG_PREFIX = "gpufleet-sandbox:"


def owner_tag(state_dir: Path) -> str:
    """The alias that marks a link or namespace as made by the sandbox under `state_dir`."""
    return f"{TAG_PREFIX}{os.path.abspath(state_dir)}"


NETNS_DIR = Path("/run/netns")


def veth_name(host: str) -> str:
    """The root-namespace end of a host's veth pair: ``gfsb-h1`` -> ``gfsb-h1v``."""
    name = f"{host}v"
    if len(name) > 15:
        raise SandboxError(f"interface name {name!r} is longer than Linux's 15 characters")
    return name


def bridge_commands(tag: str, bridge: str = BRIDGE, gateway: str = GATEWAY) -> list[list[str]]:
    """Create the bridge that carries the gateway address, tagged as ours."""
    return [
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "link", "set", "dev", bridge, "alias", tag],
        ["ip", "addr", "add", f"{gateway}/{NETMASK_BITS}", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ]


def host_network_commands(
    host: str, address: str, tag: str, bridge: str = BRIDGE
) -> list[list[str]]:
    """Create a host's namespace (tagged on its loopback at once), a veth pair into it
    (``eth0`` inside, the root end tagged) and its address."""
    veth = veth_name(host)
    return [
        ["ip", "netns", "add", host],
        ["ip", "-n", host, "link", "set", "dev", "lo", "alias", tag],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host],
        ["ip", "link", "set", "dev", veth, "alias", tag],
        ["ip", "link", "set", veth, "master", bridge, "up"],
        ["ip", "-n", host, "addr", "add", f"{address}/{NETMASK_BITS}", "dev", "eth0"],
        ["ip", "-n", host, "link", "set", "eth0", "up"],
        ["ip", "-n", host, "link", "set", "lo", "up"],
    ]


def _run(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"`{' '.join(command)}` failed: {proc.stderr.strip()}")


def create_bridge(tag: str) -> None:
    for command in bridge_commands(tag):
        _run(command)


def create_host_network(host: str, address: str, tag: str) -> None:
    for command in host_network_commands(host, address, tag):
        _run(command)


def _ip_json(*args: str) -> list[dict[str, Any]]:
    proc = subprocess.run(["ip", "-j", *args], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    data = json.loads(proc.stdout)
    return data if isinstance(data, list) else []


def namespace_tag(namespace: str) -> str:
    """The alias on the namespace's loopback ("" when it has none or cannot be read)."""
    for link in _ip_json("-n", namespace, "link", "show", "dev", "lo"):
        return str(link.get("ifalias", ""))
    return ""


def named_namespaces() -> list[str]:
    """Network namespaces with the sandbox's prefix, whoever made them."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))


def named_links(links: list[dict[str, Any]]) -> dict[str, str]:
    """Root-namespace links with the sandbox's names (bridge, veth ends) -> their alias."""
    return {
        str(link["ifname"]): str(link.get("ifalias", ""))
        for link in links
        if str(link.get("ifname", "")).startswith(PREFIX) or link.get("ifname") == BRIDGE
    }


def sandbox_namespaces(tag: str) -> list[str]:
    """The namespaces this sandbox made (running or left over from a crash)."""
    return [ns for ns in named_namespaces() if namespace_tag(ns) == tag]


def sandbox_links(tag: str) -> list[str]:
    """The root-namespace links this sandbox made (the bridge, veth ends)."""
    return sorted(
        name for name, alias in named_links(_ip_json("link", "show")).items() if alias == tag
    )


def remove_network(tag: str) -> list[str]:
    """Delete this sandbox's namespaces, veths and bridge; return what was removed.

    Deleting a namespace deletes the veth ends inside it, and with them their peers.
    """
    removed = []
    for ns in sandbox_namespaces(tag):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        removed.append(f"netns {ns}")
    for link in sandbox_links(tag):
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        removed.append(f"link {link}")
    return removed


def _owner(alias: str) -> str:
    if alias.startswith(TAG_PREFIX):
        return f"the sandbox whose state is {alias.removeprefix(TAG_PREFIX)}"
    return "not tagged by a gpufleet sandbox: an older gpufleet, or something else"


def subnet_users(
    addresses: list[dict[str, Any]],
    routes: list[dict[str, Any]],
    ours: frozenset[str] = frozenset(),
) -> list[str]:
    """What already uses the sandbox's subnet, from `ip -j addr` and `ip -j route` output:
    an address inside it on any interface, or a route at least as specific that overlaps it
    (a broader route, such as a VPN's 10.0.0.0/8, loses to ours for this /24). Links named in
    `ours` are this sandbox's own and do not count."""
    users = []
    for link in addresses:
        if link.get("ifname") in ours:
            continue
        for info in link.get("addr_info", []):
            if info.get("family") != "inet":
                continue
            if ipaddress.ip_address(info["local"]) in SANDBOX_NETWORK:
                users.append(f"address {info['local']}/{info['prefixlen']} on {link['ifname']}")
    for route in routes:
        dst = route.get("dst", "default")
        if dst == "default" or route.get("table") == "local" or route.get("dev") in ours:
            continue
        network = ipaddress.ip_network(dst, strict=False)
        if network.prefixlen >= NETMASK_BITS and network.overlaps(SANDBOX_NETWORK):
            users.append(f"route {dst} dev {route.get('dev', '?')}")
    return users


def check_free(tag: str) -> None:
    """Refuse to start when the subnet or one of the sandbox's names is taken by anything that
    is not this sandbox (run after this sandbox's own leftovers were removed)."""
    links = _ip_json("link", "show")
    ours = frozenset(name for name, alias in named_links(links).items() if alias == tag)
    problems = [
        f"link {name} ({_owner(alias)}; `ip link del {name}`)"
        for name, alias in named_links(links).items()
        if alias != tag
    ]
    problems += [
        f"network namespace {ns} ({_owner(namespace_tag(ns))}; `ip netns del {ns}`)"
        for ns in named_namespaces()
        if namespace_tag(ns) != tag
    ]
    addresses = _ip_json("-4", "addr", "show")
    problems += subnet_users(addresses, _ip_json("-4", "route", "show", "table", "all"), ours)
    if problems:
        raise SandboxError(
            f"{SANDBOX_NETWORK} or the sandbox's names are already in use on this machine: "
            + "; ".join(problems)
            + ". The sandbox needs that subnet and the gfsb-* names to itself. Fix: if another "
            "sandbox holds them, stop it with `GPUFLEET_SANDBOX_STATE=<its state dir> gpufleet "
            "sandbox down`; otherwise remove them (the commands above) or free the subnet."
        )
