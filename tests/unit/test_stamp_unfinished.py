"""Stamps only for plans that reached their end (review finding 1): a plan stopped by an error
leaves no stamp, a host planned in full forgets its old one, and drift's mode writes none."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet.drift.plan import run_plan
from gpufleet.stamp import store
from tests import pyinfra_cli
from tests.unit.test_stamp_cli import DEPLOY, NOTHING, run, write_inventory

CACHE_ERROR = "apt-cacher-ng fetches NVIDIA's repository over http(s) only"


@pytest.fixture
def stamp_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STAMP_DIR", str(tmp_path / "stamps"))
    return tmp_path


def failing(folder: Path, inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    stamps = {"GPUFLEET_STAMP_DIR": str(folder / "stamps")}
    done = pyinfra_cli.run("-v", *args, inventory, DEPLOY, env=stamps)
    assert done.returncode != 0, done.stderr[-3000:]
    return done


def test_a_plan_that_stops_with_an_error_leaves_no_stamp(stamp_env: Path) -> None:
    (stamp_env / "target").mkdir()  # the one operation has nothing to do: an empty plan so far
    inventory = write_inventory(stamp_env, x_stamp_raise=True)
    for _ in range(2):  # the second run fails the same way: nothing was stamped by the first
        done = failing(stamp_env, inventory, "--dry")
        assert "stops while planning" in done.stderr and NOTHING not in done.stderr
        assert store.load("@local") is None


def test_a_host_planned_in_full_forgets_its_old_stamp(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")
    run(stamp_env, inventory, "-y")
    assert store.load("@local") is not None
    inventory = write_inventory(stamp_env, x_stamp_raise=True)  # new inputs: planned in full
    failing(stamp_env, inventory, "--dry")
    assert not store.stamp_path("@local").exists()
    back = write_inventory(stamp_env)  # the old inputs again: the old stamp is gone with them
    assert NOTHING not in run(stamp_env, back, "--dry").stderr


def test_read_only_stamps_are_used_but_never_written(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")
    read = {"GPUFLEET_STAMP_DIR": str(stamp_env / "stamps"), "GPUFLEET_STAMPS": "read"}
    for _ in range(2):
        done = pyinfra_cli.run("-v", "--dry", inventory, DEPLOY, env=read)
        assert done.returncode == 0 and NOTHING not in done.stderr, done.stderr[-3000:]
        assert store.load("@local") is None
    run(stamp_env, inventory, "-y")  # stamped by a normal run
    done = pyinfra_cli.run("-v", "--dry", inventory, DEPLOY, env=read)
    assert NOTHING in done.stderr  # and drift's read-only mode uses it
    off = {**read, "GPUFLEET_STAMPS": "off"}
    assert NOTHING not in pyinfra_cli.run("-v", "--dry", inventory, DEPLOY, env=off).stderr


def test_a_bad_stamp_mode_is_named(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    bad = {"GPUFLEET_STAMP_DIR": str(stamp_env / "stamps"), "GPUFLEET_STAMPS": "sometimes"}
    done = pyinfra_cli.run("--dry", inventory, DEPLOY, env=bad)
    assert done.returncode != 0 and "GPUFLEET_STAMPS='sometimes'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_real_deploy_stopped_by_the_fleet_cache_check_is_not_stamped(
    stamp_env: Path,
) -> None:
    """The review's reproduction: @local as the fleet cache host with a file:// NVIDIA
    repository; --dry only (nothing on this machine changes)."""
    values = {"gpu_less": True, "ssh_hostname": "127.0.0.1"}
    values["nvidia_repo_url"] = "file:///srv/nvidia-mirror"
    inventory = stamp_env / "inventory.py"
    inventory.write_text(f"hosts = [('@local', {values!r})]\ngpufleet_cache = ['@local']\n")
    stamps = {"GPUFLEET_STAMP_DIR": str(stamp_env / "stamps")}
    for _ in range(2):
        done = pyinfra_cli.run("-v", "--dry", inventory, pyinfra_cli.GPU_NODE, env=stamps)
        assert done.returncode != 0, done.stderr[-3000:]
        assert CACHE_ERROR in done.stderr and NOTHING not in done.stderr
        assert store.load("@local") is None


def test_drift_uses_stamps_but_never_writes_one(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")  # the directory made: the next plans are empty
    for _ in range(2):
        done = run_plan(str(inventory), str(DEPLOY), timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert store.load("@local") is None
