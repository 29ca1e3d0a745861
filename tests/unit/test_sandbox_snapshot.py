"""Snapshot records of the sandbox (gpufleet.sandbox.snapshot): names, checks, layers, forget."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from gpufleet.sandbox import snapshot
from gpufleet.sandbox.hosts import overlay_mount_command
from gpufleet.sandbox.state import HostState, SandboxError, SandboxState, save_state


def _record(state_dir: Path, **changes: object) -> snapshot.SnapshotMeta:
    meta = snapshot.SnapshotMeta(
        name="provisioned",
        image="ubuntu22.04",
        os=["ubuntu", "22.04"],
        kernel_release=os.uname().release,
        hosts=["gfsb-h1", "gfsb-h2"],
    )
    for key, value in changes.items():
        setattr(meta, key, value)
    folder = snapshot.snapshot_dir(meta.name, state_dir)
    folder.mkdir(parents=True)
    (folder / snapshot.META).write_text(json.dumps(asdict(meta)))
    return meta


@pytest.mark.parametrize("name", ["", "Up", "../x", "a/b", "-x", "x" * 65, "a b"])
def test_a_name_that_is_no_plain_folder_name_is_refused(name: str) -> None:
    with pytest.raises(SandboxError, match="is not allowed"):
        snapshot.check_name(name)


def test_a_missing_snapshot_names_those_there_are(tmp_path: Path) -> None:
    _record(tmp_path)
    with pytest.raises(SandboxError, match=r"no snapshot 'other'.*snapshots here: provisioned"):
        snapshot.load("other", tmp_path)
    assert snapshot.load("provisioned", tmp_path).hosts == ["gfsb-h1", "gfsb-h2"]


def test_a_folder_without_its_record_is_no_snapshot(tmp_path: Path) -> None:
    """An interrupted `take` leaves its folder without snapshot.json: never booted from."""
    (snapshot.snapshot_dir("half", tmp_path) / "hosts").mkdir(parents=True)
    with pytest.raises(SandboxError, match="no snapshot 'half'"):
        snapshot.load("half", tmp_path)


def test_another_image_or_kernel_is_refused(tmp_path: Path) -> None:
    meta = _record(tmp_path, kernel_release="0.0.0-other")
    with pytest.raises(SandboxError, match=r"taken on ubuntu22\.04, not ubuntu20\.04"):
        snapshot.check_usable(meta, "ubuntu20.04")
    with pytest.raises(SandboxError, match=r"under kernel 0\.0\.0-other"):
        snapshot.check_usable(meta, None)


def test_hosts_boot_on_their_own_layer_and_others_come_up_bare(tmp_path: Path) -> None:
    meta = _record(tmp_path)
    assert snapshot.layers_of(meta, "gfsb-h2", tmp_path) == [
        tmp_path / "snapshots" / "provisioned" / "hosts" / "gfsb-h2"
    ]
    assert snapshot.layers_of(meta, "gfsb-h3", tmp_path) == []


def test_the_snapshot_layer_sits_between_the_host_and_the_image() -> None:
    command = overlay_mount_command(
        [Path("/s/gfsb-h1"), Path("/img")], Path("/u"), Path("/w"), Path("/root")
    )
    assert "lowerdir=/s/gfsb-h1:/img,upperdir=/u,workdir=/w" in command
    assert "lowerdir=/img," in " ".join(
        overlay_mount_command(Path("/img"), Path("/u"), Path("/w"), Path("/root"))
    )


def test_a_snapshot_in_use_is_kept_and_one_not_in_use_deleted(tmp_path: Path) -> None:
    _record(tmp_path)
    layer = str(snapshot.host_layer("provisioned", "gfsb-h1", tmp_path))
    state = SandboxState(
        image="ubuntu22.04",
        os=["ubuntu", "22.04"],
        hosts=[HostState("gfsb-h1", "10.231.7.11", layers=[layer])],
    )
    save_state(state, tmp_path)
    with pytest.raises(SandboxError, match="in use by gfsb-h1"):
        snapshot.forget("provisioned", state_dir=tmp_path)
    (tmp_path / "state.json").unlink()
    assert snapshot.forget("provisioned", state_dir=tmp_path) is True
    assert snapshot.forget("provisioned", state_dir=tmp_path) is False


def test_the_kept_repository_is_served_again_with_its_key(tmp_path: Path) -> None:
    meta = _record(
        tmp_path,
        repo_key_path="nvidia/ubuntu2204/x86_64/k.pub",
        repo_key_fingerprint="AB" * 20,
    )
    kept = snapshot.snapshot_dir(meta.name, tmp_path) / "www" / "nvidia" / "ubuntu2204" / "x86_64"
    kept.mkdir(parents=True)
    (kept / "k.pub").write_text("key")
    (kept / "Release").write_text("release")
    www = tmp_path / "www"
    (www / "nvidia").mkdir(parents=True)
    (www / "nvidia" / "stale").write_text("from another up")
    assert snapshot.restore_standins(meta, www, tmp_path) == (meta.repo_key_path, "AB" * 20)
    assert (www / "nvidia/ubuntu2204/x86_64/Release").read_text() == "release"
    assert not (www / "nvidia" / "stale").exists()
