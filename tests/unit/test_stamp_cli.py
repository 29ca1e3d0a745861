"""Deploy stamps through the real pyinfra CLI on @local (issue 18): a run that changes nothing
stamps the host, the next plans nothing, and any change to what the plan read plans it again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gpufleet.stamp import store
from tests import pyinfra_cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = Path(__file__).with_name("stamp_data") / "deploy.py"
NOTHING = "nothing to plan"


def write_inventory(folder: Path, **data: object) -> Path:
    values = {"x_stamp_target": str(folder / "target"), "gpu_less": True, **data}
    path = folder / "inventory.py"
    path.write_text(f"hosts = [('@local', {values!r})]\n")
    return path


def run(folder: Path, inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    stamps = {"GPUFLEET_STAMP_DIR": str(folder / "stamps")}
    done = pyinfra_cli.run("-v", "--json", *args, inventory, DEPLOY, env=stamps)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def changed_ops(done: subprocess.CompletedProcess[str]) -> list[str]:
    report = json.loads(done.stdout)
    if report.get("results"):
        return [op["name"] for op in report["results"]["operations"] if op["success"]]
    return [op["name"] for op in report["plan"] if op["hosts_with_change"]]


def planned_ops(done: subprocess.CompletedProcess[str]) -> int:
    report = json.loads(done.stdout)
    if report.get("results"):
        return len(report["results"]["operations"])
    return len(report["plan"])


@pytest.fixture
def stamp_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STAMP_DIR", str(tmp_path / "stamps"))
    return tmp_path


def test_a_run_that_changes_nothing_stamps_the_host_and_the_next_plans_nothing(
    stamp_env: Path,
) -> None:
    inventory = write_inventory(stamp_env)
    first = run(stamp_env, inventory, "-y")
    assert changed_ops(first) == ["the test's directory"]
    assert store.load("@local") is None  # a run that changed something is never stamped
    second = run(stamp_env, inventory, "-y")
    assert changed_ops(second) == [] and planned_ops(second) == 1
    path = store.stamp_path("@local")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stamp = store.load("@local")
    assert stamp is not None and stamp.facts, "the stamp names the facts the plan read"
    third = run(stamp_env, inventory, "-y")
    assert NOTHING in third.stderr and planned_ops(third) == 0
    dry = run(stamp_env, inventory, "--dry")
    assert NOTHING in dry.stderr and planned_ops(dry) == 0


def test_a_change_on_the_host_is_planned_again_and_fixed(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")
    run(stamp_env, inventory, "-y")  # stamps
    (stamp_env / "target").rmdir()  # what the directory operation's fact reads
    dry = run(stamp_env, inventory, "--dry")
    assert NOTHING not in dry.stderr
    assert changed_ops(dry) == ["the test's directory"]
    fixed = run(stamp_env, inventory, "-y")
    assert changed_ops(fixed) == ["the test's directory"]
    assert (stamp_env / "target").is_dir()


def test_a_change_of_inventory_data_plans_the_host_again(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")
    run(stamp_env, inventory, "-y")
    assert NOTHING in run(stamp_env, inventory, "-y").stderr
    inventory = write_inventory(stamp_env, min_free_disk_gib=3)  # an input, not a fact
    again = run(stamp_env, inventory, "-y")
    assert NOTHING not in again.stderr and planned_ops(again) == 1


def test_deploy_stamp_false_always_plans_in_full(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env, deploy_stamp=False)
    for _ in range(3):
        done = run(stamp_env, inventory, "-y")
        assert NOTHING not in done.stderr and planned_ops(done) == 1
    assert store.load("@local") is None


def test_a_stamp_others_can_write_is_ignored(stamp_env: Path) -> None:
    inventory = write_inventory(stamp_env)
    run(stamp_env, inventory, "-y")
    run(stamp_env, inventory, "-y")
    os.chmod(store.stamp_path("@local"), 0o666)
    done = run(stamp_env, inventory, "-y")
    assert NOTHING not in done.stderr and planned_ops(done) == 1
