"""OpenSSH settings for testinfra, generated from the inventory's pyinfra `ssh_*` data."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlencode

from gpufleet.inventory import InventoryError, InventoryHost

# pyinfra's ssh_strict_host_key_checking values -> OpenSSH's StrictHostKeyChecking.
STRICT_VALUES = {"yes": "yes", "no": "no", "off": "no", "accept-new": "accept-new", "ask": "yes"}


def _quote(value: str) -> str:
    """Quote an ssh_config argument that holds spaces (ssh_config(5) accepts double quotes)."""
    if '"' in value or "\n" in value:
        raise InventoryError(f"ssh setting {value!r} contains a quote or newline")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def host_block(alias: str, host: InventoryHost, control_dir: Path) -> str:
    """One ``Host`` block: how to reach ``host`` under the name ``alias``.

    Example: ``host_block("gpufleet-000", InventoryHost("gpu-a", "ssh", "10.0.0.5"), Path("/tmp"))``
    """
    data = host.data
    strict = str(data.get("ssh_strict_host_key_checking") or "accept-new").lower()
    if strict not in STRICT_VALUES:
        raise InventoryError(
            f"host {host.name}: ssh_strict_host_key_checking={strict!r} is not one of "
            f"{', '.join(STRICT_VALUES)}"
        )
    lines = [
        f"Host {alias}",
        f"    HostName {_quote(str(host.ssh_hostname))}",
        "    BatchMode yes",
        f"    StrictHostKeyChecking {STRICT_VALUES[strict]}",
        f"    ControlPath {_quote(str(control_dir / 'cm-%C'))}",
    ]
    if host.ssh_port:
        lines.append(f"    Port {host.ssh_port}")
    if host.ssh_user:
        lines.append(f"    User {_quote(host.ssh_user)}")
    if host.ssh_key:
        lines += [f"    IdentityFile {_quote(host.ssh_key)}", "    IdentitiesOnly yes"]
    if data.get("ssh_known_hosts_file"):
        lines.append(f"    UserKnownHostsFile {_quote(str(data['ssh_known_hosts_file']))}")
    if data.get("ssh_allow_agent") is False:
        lines.append("    IdentityAgent none")
    if data.get("ssh_forward_agent"):
        lines.append("    ForwardAgent yes")
    return "\n".join(lines) + "\n"


def ssh_config_text(hosts: Sequence[tuple[str, InventoryHost]], *, control_dir: Path) -> str:
    """A whole ssh_config for the run; a host's own ``ssh_config_file`` is included first."""
    includes = sorted(
        {str(h.data["ssh_config_file"]) for _a, h in hosts if h.data.get("ssh_config_file")}
    )
    head = [f"Include {_quote(path)}" for path in includes]
    blocks = [host_block(alias, host, control_dir) for alias, host in hosts]
    return "\n".join(
        ["# written by gpufleet validate; one Host block per inventory host", *head, "", *blocks]
    )


def hostspec_for(host: InventoryHost, alias: str) -> str:
    """``local://`` or ``ssh://ALIAS`` (settings in the generated ssh_config), with sudo."""
    if host.is_local:
        return "local://"
    query = {}
    if host.data.get("_sudo"):
        query["sudo"] = "true"
        if host.data.get("_sudo_user"):
            query["sudo_user"] = str(host.data["_sudo_user"])
    return f"ssh://{alias}" + (f"?{urlencode(query)}" if query else "")


def close_masters(ssh_config: Path, aliases: Sequence[str]) -> None:
    """Stop the ControlMaster processes testinfra's ssh backend left behind (ControlPersist)."""
    for alias in aliases:
        subprocess.run(
            ["ssh", "-F", str(ssh_config), "-O", "exit", alias],
            capture_output=True,
            timeout=10,
            check=False,
        )
