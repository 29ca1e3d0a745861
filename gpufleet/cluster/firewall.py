"""The TF worker port open only to the group's own addresses while the cluster tier runs.

TensorFlow's gRPC server listens on every interface with no authentication whatever address
TF_CONFIG names: anyone who reaches the port can run TF ops (write files) as the SSH user. So
for the run each host gets an nftables table of its own (``inet gpufleet_<run id>``) that
accepts the port from loopback and the group's addresses and drops it from anywhere else; the
clean-up deletes the table. A host where the table cannot be added (no ``nft``, no root) stops
the run before any worker starts.

Example::

    failed = guard(launcher, hosts, run_id)   # {} when every host has its table
    ...                                       # the job
    unguard(launcher, hosts, run_id)
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
from collections.abc import Sequence
from typing import Protocol

from gpufleet.cluster.config import ClusterHost, plain_run_id


class _Runs(Protocol):
    def run(
        self, host: ClusterHost, script: str, timeout: float = 60, stdin: str = ""
    ) -> tuple[int, str, str]: ...


def table_name(run_id: str) -> str:
    """``gpufleet_<run id>`` with ``-`` as ``_`` (nft names are letters, digits and ``_``)."""
    return "gpufleet_" + plain_run_id(run_id).replace("-", "_")


def ruleset(run_id: str, port: int, members: Sequence[str]) -> str:
    """The nft table: ``port`` accepted from loopback and ``members``, dropped from the rest."""
    addresses = [ipaddress.ip_address(a.strip("[]")) for a in members]  # ValueError: not one
    v4 = sorted({str(a) for a in addresses if a.version == 4})
    v6 = sorted({str(a) for a in addresses if a.version == 6})
    port = int(port)
    rules = ["iif lo accept"]
    if v4:
        rules.append(f"tcp dport {port} ip saddr {{ {', '.join(v4)} }} accept")
    if v6:
        rules.append(f"tcp dport {port} ip6 saddr {{ {', '.join(v6)} }} accept")
    rules.append(f"tcp dport {port} drop")
    body = "\n".join(f"    {rule}" for rule in rules)
    return (
        f"table inet {table_name(run_id)} {{\n  chain input {{\n"
        f"    type filter hook input priority -10; policy accept;\n{body}\n  }}\n}}\n"
    )


def _elevated(host: ClusterHost, script: str) -> str:
    return f"sudo -n sh -c {shlex.quote(script)}" if host.sudo else script


def member_addresses(hosts: Sequence[ClusterHost]) -> list[str]:
    """Every host's cluster address as IP addresses (a name resolved here, all its addresses);
    OSError naming a name that does not resolve."""
    found: list[str] = []
    for host in hosts:
        address = host.address.strip("[]")
        try:
            found.append(str(ipaddress.ip_address(address)))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise OSError(f"{host.name}'s address {address!r} does not resolve: {exc}") from None
        found += [str(info[4][0]).split("%", 1)[0] for info in infos]
    return found


def guard(launcher: _Runs, hosts: Sequence[ClusterHost], run_id: str) -> dict[str, str]:
    """Add the table on every host; per host where it failed, why (nft's own words)."""
    try:
        members = member_addresses(hosts)
    except OSError as exc:
        return {host.name: str(exc) for host in hosts}
    failed = {}
    for host in hosts:
        rules = ruleset(run_id, host.worker_port, members)
        status, _out, err = launcher.run(host, _elevated(host, "nft -f -"), stdin=rules)
        if status != 0:
            lines = [line for line in err.strip().splitlines() if line.strip()]
            failed[host.name] = lines[-1] if lines else f"nft exit {status}"
    return failed


def unguard(launcher: _Runs, hosts: Sequence[ClusterHost], run_id: str) -> dict[str, str]:
    """Delete the table on every host; per host where it is still there, why."""
    name = table_name(run_id)
    left = {}
    for host in hosts:
        gone = f"! nft list table inet {name} >/dev/null 2>&1"
        script = f"nft delete table inet {name} 2>/dev/null; {gone}"
        status, _out, err = launcher.run(host, _elevated(host, script))
        if status != 0:
            left[host.name] = f"firewall table inet {name} left ({err.strip()[:200] or status})"
    return left
