"""Snapshots of provisioned sandbox hosts: a host's disk kept as a layer that later hosts boot on.

A host's root is an overlay: the shared base image below, the host's own changes (``upper``)
above. `take` powers each host off cleanly, moves its ``upper`` into the snapshot, and boots the
host again on that snapshot as a new lower layer: nothing is copied, and the running host's later
changes never reach the snapshot. `gpufleet sandbox up --from-snapshot NAME` then mounts
``lowerdir=<snapshot>/<host>:<image>`` for each host, so a test that needs "a provisioned host"
starts from one in seconds instead of a first deploy of minutes. The stand-in NVIDIA repository
is kept with the snapshot (its throwaway signing key is the one the hosts trust), and served as
it was. Example::

    take("provisioned", ["gfsb-h1", "gfsb-h2"])   # snapshot_take.py, after a first deploy
    up(2, snapshot="provisioned")                  # later: two provisioned hosts
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.sandbox.state import STATE_DIR, SandboxError, SandboxState, load_state

Log = Callable[[str], None]
META = "snapshot.json"
FORMAT = 1
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass
class SnapshotMeta:
    """What a snapshot holds and what it needs: the image and kernel it was made on, its
    hosts, and the stand-in repository's key that its hosts trust (empty without stand-ins)."""

    name: str
    image: str
    os: list[str]
    kernel_release: str
    hosts: list[str] = field(default_factory=list)
    repo_key_path: str = ""  # the public key's path under www/, as the hosts fetched it
    repo_key_fingerprint: str = ""
    taken_at: float = 0.0
    format: int = FORMAT

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SnapshotMeta:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def snapshots_dir(state_dir: Path = STATE_DIR) -> Path:
    return state_dir / "snapshots"


def check_name(name: str) -> str:
    """A snapshot's name becomes a folder: lower-case letters, digits, '.', '_' and '-'."""
    if not NAME.fullmatch(name):
        raise SandboxError(
            f"snapshot name {name!r} is not allowed: use 1-64 of a-z, 0-9, '.', '_', '-' "
            "(starting with a letter or digit), e.g. provisioned-22.04"
        )
    return name


def snapshot_dir(name: str, state_dir: Path = STATE_DIR) -> Path:
    return snapshots_dir(state_dir) / check_name(name)


def host_layer(name: str, host: str, state_dir: Path = STATE_DIR) -> Path:
    """The layer that holds `host`'s disk in snapshot `name`."""
    return snapshot_dir(name, state_dir) / "hosts" / host


def load(name: str, state_dir: Path = STATE_DIR) -> SnapshotMeta:
    """The snapshot's record; a clear error naming the snapshots there are when it is missing."""
    path = snapshot_dir(name, state_dir) / META
    try:
        meta = SnapshotMeta.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        there = sorted(p.parent.name for p in snapshots_dir(state_dir).glob(f"*/{META}"))
        raise SandboxError(
            f"no snapshot {name!r} (no {path}); snapshots here: {', '.join(there) or 'none'}. "
            "Fix: `gpufleet sandbox snapshot NAME` on a running, provisioned sandbox"
        ) from None
    except (json.JSONDecodeError, TypeError) as exc:
        raise SandboxError(f"{path} is not a snapshot record ({exc}); forget it") from None
    if meta.format != FORMAT:
        raise SandboxError(f"snapshot {name!r} is of format {meta.format}, not {FORMAT}: forget it")
    return meta


def check_usable(meta: SnapshotMeta, image_name: str | None) -> None:
    """Refuse a snapshot that cannot boot here as it was taken."""
    if image_name is not None and image_name != meta.image:
        raise SandboxError(
            f"snapshot {meta.name!r} was taken on {meta.image}, not {image_name}: "
            f"leave out --image, or take a snapshot on {image_name}"
        )
    if meta.kernel_release != os.uname().release:
        raise SandboxError(
            f"snapshot {meta.name!r} was taken under kernel {meta.kernel_release}, and this "
            f"machine runs {os.uname().release} (its hosts' driver modules were built for the "
            "other one): forget it and take a new one"
        )


def forget(name: str, *, state_dir: Path = STATE_DIR) -> bool:
    """Delete snapshot `name`, unless a host of the running sandbox boots on it; True if it was
    there."""
    target = snapshot_dir(name, state_dir)
    try:
        state: SandboxState | None = load_state(state_dir)
    except SandboxError:
        state = None
    users = [
        h.name
        for h in (state.hosts if state else [])
        if any(Path(layer).is_relative_to(target) for layer in h.layers)
    ]
    if users:
        raise SandboxError(
            f"snapshot {name!r} is in use by {', '.join(users)}: `gpufleet sandbox down` first"
        )
    if not target.exists():
        return False
    shutil.rmtree(target)
    return True


def layers_of(meta: SnapshotMeta, host: str, state_dir: Path = STATE_DIR) -> list[Path]:
    """The layers `host` boots on from snapshot `meta`: its own disk, or none for a host the
    snapshot does not hold (that one comes up bare)."""
    return [host_layer(meta.name, host, state_dir)] if host in meta.hosts else []


def copy_repository(source: Path, target: Path, key_path: str) -> None:
    """Copy a served stand-in repository (``nvidia/`` and the public key at `key_path`) from
    one www folder to another, replacing what `target` held."""
    shutil.rmtree(target / "nvidia", ignore_errors=True)
    shutil.copytree(source / "nvidia", target / "nvidia", symlinks=True)
    if not (source / key_path).is_relative_to(source / "nvidia"):
        (target / key_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / key_path, target / key_path)


def restore_standins(meta: SnapshotMeta, www: Path, state_dir: Path = STATE_DIR) -> tuple[str, str]:
    """Serve the snapshot's stand-in repository again: its packages and the key its hosts
    trust. Returns the key's path under `www` and its fingerprint."""
    copy_repository(snapshot_dir(meta.name, state_dir) / "www", www, meta.repo_key_path)
    return meta.repo_key_path, meta.repo_key_fingerprint
