"""OpenSSH settings for testinfra, generated from the inventory's pyinfra `ssh_*` data."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlencode

from gpufleet.inventory import InventoryError, InventoryHost

# pyinfra's ssh_strict_host_key_checking values -> OpenSSH's StrictHostKeyChecking.
STRICT_VALUES = {"yes": "yes", "no": "no", "off": "no", "accept-new": "accept-new", "ask": "yes"}


# What a host name may be before it goes into the generated ssh_config: DNS names and IPv4
# (letters, digits, ".", "-", "_"), or an IPv6 address, bracketed or not, with a %zone. No
# leading "-" or ".", so it can never read as an option, and nothing a shell gives meaning to:
# ssh hands HostName to ProxyCommand/ProxyJump, which run through the user's shell.
_IPV6 = r"(?=[0-9A-Fa-f.]*:)[0-9A-Fa-f:.]{2,45}(%[A-Za-z0-9_.-]{1,32})?"
HOSTNAME_RE = re.compile(rf"(?![-.])[A-Za-z0-9._-]{{1,253}}|{_IPV6}|\[{_IPV6}\]")
# A login name as useradd(8) and most directories accept it (POSIX portable, plus a trailing
# "$" for machine accounts); no "@", so "user@host" can never change the host.
USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,31}\$?")
STRICT_HINT = "letters, digits, '.', '-' and '_' (or an IPv6 address), not starting with '-' or '.'"


def check_ssh_names(host: InventoryHost) -> None:
    """Raise InventoryError unless the host name, ssh user and sudo user are plain names."""
    hostname = str(host.ssh_hostname)
    if not HOSTNAME_RE.fullmatch(hostname):
        raise InventoryError(
            f"host {host.name!r}: ssh host name {hostname!r} is not a host name; fix the "
            f"inventory's ssh_hostname (or the host's name) to {STRICT_HINT}"
        )
    for key, value in (("ssh_user", host.ssh_user), ("_sudo_user", host.data.get("_sudo_user"))):
        if value is not None and value != "" and not USER_RE.fullmatch(str(value)):
            raise InventoryError(
                f"host {host.name!r}: {key}={value!r} is not a user name; use letters, digits, "
                "'.', '-' and '_', starting with a letter or '_' (at most 32 characters)"
            )
    if host.ssh_port is not None and not 0 < host.ssh_port < 65536:
        raise InventoryError(
            f"host {host.name!r}: ssh_port={host.ssh_port} is not a port; use 1 to 65535"
        )


def _quote(value: str, key: str = "ssh setting") -> str:
    """Quote an ssh_config argument that holds spaces (ssh_config(5) accepts double quotes)."""
    if '"' in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InventoryError(
            f"{key}={value!r} contains a double quote or a control character, which "
            "ssh_config cannot hold; rename the file or fix the value"
        )
    return f'"{value}"' if any(c.isspace() for c in value) else value


def host_block(alias: str, host: InventoryHost, control_dir: Path) -> str:
    """One ``Host`` block: how to reach ``host`` under the name ``alias``.

    Example: ``host_block("gpufleet-000", InventoryHost("gpu-a", "ssh", "10.0.0.5"), Path("/tmp"))``
    """
    data = host.data
    check_ssh_names(host)
    strict = str(data.get("ssh_strict_host_key_checking") or "accept-new").lower()
    if strict not in STRICT_VALUES:
        raise InventoryError(
            f"host {host.name!r}: ssh_strict_host_key_checking={strict!r} is not one of "
            f"{', '.join(STRICT_VALUES)}; fix it in the inventory"
        )
    lines = [
        f"Host {alias}",
        f"    HostName {host.ssh_hostname}",
        "    BatchMode yes",
        f"    StrictHostKeyChecking {STRICT_VALUES[strict]}",
        f"    ControlPath {_quote(str(control_dir / 'cm-%C'))}",
    ]
    if host.ssh_port:
        lines.append(f"    Port {host.ssh_port}")
    if host.ssh_user:
        lines.append(f"    User {host.ssh_user}")
    if host.ssh_key:
        lines += [f"    IdentityFile {_quote(host.ssh_key, 'ssh_key')}", "    IdentitiesOnly yes"]
    if data.get("ssh_known_hosts_file"):
        known = _quote(str(data["ssh_known_hosts_file"]), "ssh_known_hosts_file")
        lines.append(f"    UserKnownHostsFile {known}")
    if data.get("ssh_allow_agent") is False:
        lines.append("    IdentityAgent none")
    if data.get("ssh_forward_agent"):
        lines.append("    ForwardAgent yes")
    return "\n".join(lines) + "\n"


def host_problem(host: InventoryHost) -> str:
    """Why ``host``'s ssh settings cannot go into the generated ssh_config, or ""."""
    try:
        host_block("gpufleet-check", host, Path("/"))
        if host.data.get("ssh_config_file"):
            _quote(str(host.data["ssh_config_file"]), "ssh_config_file")
    except InventoryError as exc:
        return str(exc)
    return ""


def ssh_config_text(hosts: Sequence[tuple[str, InventoryHost]], *, control_dir: Path) -> str:
    """A whole ssh_config for the run; a host's own ``ssh_config_file`` is included first."""
    includes = sorted(
        {str(h.data["ssh_config_file"]) for _a, h in hosts if h.data.get("ssh_config_file")}
    )
    head = [f"Include {_quote(path, 'ssh_config_file')}" for path in includes]
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
