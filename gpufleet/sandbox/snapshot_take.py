"""Taking a snapshot of running sandbox hosts (gpufleet/sandbox/snapshot.py says what one is)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from gpufleet.sandbox import hostctl, hosts
from gpufleet.sandbox.image import IMAGES, image_dir
from gpufleet.sandbox.snapshot import (
    META,
    SnapshotMeta,
    copy_repository,
    forget,
    host_layer,
    snapshot_dir,
)
from gpufleet.sandbox.state import STATE_DIR, SandboxError, SandboxState, load_state, save_state

Log = Callable[[str], None]


def _keep_standins(state: SandboxState, target: Path, state_dir: Path) -> tuple[str, str]:
    """Copy the served stand-in repository (and its public key) into the snapshot."""
    if not state.nvidia_repo_url:
        return "", ""
    key_path = state.nvidia_repo_key_url.split("/", 3)[3]  # http://gw:port/<path>
    copy_repository(state_dir / "www", target / "www", key_path)
    return key_path, state.nvidia_repo_key_fingerprint


def _remount(host: str, layers: Sequence[Path], image: Path, state_dir: Path) -> None:
    """Mount `host`'s root afresh: an empty upper layer over `layers` over the base image."""
    base = hosts.host_dir(host, state_dir)
    root, upper, work = base / "root", base / "upper", base / "work"
    for path in (upper, work):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
    proc = subprocess.run(
        hosts.overlay_mount_command([*layers, image], upper, work, root),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SandboxError(f"cannot mount {host}'s root on its snapshot: {proc.stderr.strip()}")


def take(
    name: str,
    host_names: Sequence[str] = (),
    *,
    state_dir: Path = STATE_DIR,
    log: Log = print,
) -> SnapshotMeta:
    """Snapshot `host_names` (default every host) of the running sandbox as `name`; the hosts
    run on afterwards, booted again on top of it."""
    target = snapshot_dir(name, state_dir)
    if (target / META).exists():
        raise SandboxError(f"snapshot {name!r} exists already; forget it first ({target})")
    state = load_state(state_dir)
    chosen = list(host_names) or [h.name for h in state.hosts]
    by_name = {h.name: h for h in state.hosts}
    unknown = [h for h in chosen if h not in by_name]
    if unknown:
        raise SandboxError(f"no host {', '.join(unknown)} in this sandbox ({', '.join(by_name)})")
    stacked = [h for h in chosen if by_name[h].layers]
    if stacked:
        raise SandboxError(
            f"{', '.join(stacked)} already run(s) on a snapshot: snapshots do not stack; "
            "take it from hosts brought up without --from-snapshot"
        )
    forget(name, state_dir=state_dir)  # what an interrupted `take` left (it has no record)
    image = image_dir(IMAGES[state.image])
    started = time.monotonic()
    (target / "hosts").mkdir(parents=True)
    key_path, fingerprint = _keep_standins(state, target, state_dir)
    for host in chosen:  # one at a time: the others keep serving while one is off
        hostctl.stop(host, state_dir=state_dir)
        subprocess.run(["umount", str(hosts.host_root(host, state_dir))], check=True)
        layer = host_layer(name, host, state_dir)
        (hosts.host_dir(host, state_dir) / "upper").rename(layer)
        _remount(host, [layer], image, state_dir)
        _set_layers(host, [str(layer)], state_dir)
        hostctl.start(host, state_dir=state_dir)
    meta = SnapshotMeta(
        name=name,
        image=state.image,
        os=list(state.os),
        kernel_release=state.kernel_release or os.uname().release,
        hosts=chosen,
        repo_key_path=key_path,
        repo_key_fingerprint=fingerprint,
        taken_at=time.time(),
    )
    # Written last: a folder without its record is an interrupted `take`, never booted from.
    (target / META).write_text(json.dumps(asdict(meta), indent=2) + "\n")
    log(f"snapshot {name}: {len(chosen)} host(s) in {time.monotonic() - started:.1f} s")
    return meta


def _set_layers(host: str, layers: list[str], state_dir: Path) -> None:
    state = load_state(state_dir)
    for entry in state.hosts:
        if entry.name == host:
            entry.layers = layers
    save_state(state, state_dir)
