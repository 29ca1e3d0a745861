"""Each sandbox host's root file system (an overlay over the base image) and its SSH identity."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpufleet.sandbox import pci_record
from gpufleet.sandbox.state import STATE_DIR, SandboxError


def host_dir(name: str, state_dir: Path = STATE_DIR) -> Path:
    return state_dir / "hosts" / name


def host_root(name: str, state_dir: Path = STATE_DIR) -> Path:
    """The mounted overlay that the host boots from."""
    return host_dir(name, state_dir) / "root"


def client_key(state_dir: Path = STATE_DIR) -> Path:
    """The private key that reaches every host as root (generated once, kept)."""
    return state_dir / "id_ed25519"


def known_hosts_file(state_dir: Path = STATE_DIR) -> Path:
    return state_dir / "known_hosts"


def _keygen(path: Path, comment: str) -> None:
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )


def ensure_client_key(state_dir: Path = STATE_DIR) -> Path:
    key = client_key(state_dir)
    _keygen(key, "gpufleet-sandbox")
    return key


def ensure_host_key(name: str, state_dir: Path = STATE_DIR) -> Path:
    """A host's SSH host key, made the first time its name is used and kept across `down`/`up`,
    so known_hosts entries stay valid."""
    key = state_dir / "hostkeys" / name / "ssh_host_ed25519_key"
    _keygen(key, f"root@{name}")
    machine_id = key.parent / "machine-id"
    if not machine_id.is_file():
        machine_id.write_text(secrets.token_hex(16) + "\n")
    return key


def overlay_mount_command(
    lower: Path | Sequence[Path], upper: Path, work: Path, merged: Path
) -> list[str]:
    """``mount -t overlay``; with several lower layers the first is the topmost."""
    lowers = [lower] if isinstance(lower, Path) else list(lower)
    return [
        "mount",
        "-t",
        "overlay",
        "overlay",
        "-o",
        f"lowerdir={':'.join(str(p) for p in lowers)},upperdir={upper},workdir={work}",
        str(merged),
    ]


def prepare_host(
    name: str,
    address: str,
    image: Path,
    state_dir: Path = STATE_DIR,
    layers: Sequence[Path] = (),
    pci: str = "",
) -> Path:
    """Mount a fresh overlay root for `name` and give it its identity; return the root.

    Each `up` starts from a clean upper layer over `layers` (a snapshot of the host, topmost
    first) and the base image: bare hosts without layers. `pci` names the recorded PCI listing
    whose tree the host boots with over its /sys/bus/pci/devices (pci_record.py), if any.
    """
    base = host_dir(name, state_dir)
    shutil.rmtree(base, ignore_errors=True)
    upper, work, root = base / "upper", base / "work", base / "root"
    for path in (upper, work, root):
        path.mkdir(parents=True)
    if pci:
        pci_record.host_tree(base, pci)
    proc = subprocess.run(
        overlay_mount_command([*layers, image], upper, work, root), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SandboxError(f"cannot mount the overlay root of {name}: {proc.stderr.strip()}")
    host_key = ensure_host_key(name, state_dir)
    ssh_dir = root / "etc/ssh"
    for suffix in ("", ".pub"):
        target = ssh_dir / f"ssh_host_ed25519_key{suffix}"
        shutil.copyfile(f"{host_key}{suffix}", target)
        target.chmod(0o600 if suffix == "" else 0o644)
    (root / "etc/machine-id").write_text((host_key.parent / "machine-id").read_text())
    (root / "etc/hostname").write_text(f"{name}\n")
    (root / "etc/hosts").write_text(
        f"127.0.0.1 localhost\n127.0.1.1 {name}\n{address} {name}\n"
        "::1 localhost ip6-localhost ip6-loopback\n"
    )
    # A test host that hangs on shutdown should not hold `sandbox down` for systemd's 90 s.
    conf_dir = root / "etc/systemd/system.conf.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "gpufleet-sandbox.conf").write_text(
        "# gpufleet sandbox: stop hung units quickly when the host shuts down\n"
        "[Manager]\nDefaultTimeoutStopSec=10s\n"
    )
    root_ssh = root / "root/.ssh"
    root_ssh.mkdir(mode=0o700, exist_ok=True)
    authorized = root_ssh / "authorized_keys"
    authorized.write_text(Path(f"{client_key(state_dir)}.pub").read_text())
    authorized.chmod(0o600)
    return root


def known_hosts_line(name: str, address: str, state_dir: Path = STATE_DIR) -> str:
    """``ADDRESS,NAME ssh-ed25519 AAAA...`` for the host's persistent key."""
    public = (state_dir / "hostkeys" / name / "ssh_host_ed25519_key.pub").read_text().split()
    return f"{address} {public[0]} {public[1]}\n"


def sandbox_mounts(state_dir: Path = STATE_DIR) -> list[str]:
    """Mount points under the state directory (overlays of running or crashed hosts)."""
    prefix = f"{state_dir}/"
    mounts = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mount_point = line.split()[1]
        if mount_point.startswith(prefix):
            mounts.append(mount_point)
    # innermost first, so nested mounts come off before their parents
    return sorted(mounts, key=len, reverse=True)


def unmount_all(state_dir: Path = STATE_DIR) -> list[str]:
    """Unmount every sandbox mount, lazily if busy; return those that were mounted."""
    mounts = sandbox_mounts(state_dir)
    for mount_point in mounts:
        proc = subprocess.run(["umount", mount_point], capture_output=True)
        if proc.returncode != 0:
            subprocess.run(["umount", "-l", mount_point], capture_output=True)
    return mounts


def remove_host_dirs(state_dir: Path = STATE_DIR) -> None:
    """Delete hosts' overlay layers (their disks); host keys are kept."""
    if sandbox_mounts(state_dir):
        raise SandboxError("refusing to delete host directories while overlays are mounted")
    shutil.rmtree(state_dir / "hosts", ignore_errors=True)
