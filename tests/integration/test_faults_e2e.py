"""Faults of issue 11 injected on the sandbox the way they happen, each recovered by one re-run.

Two fresh hosts. gfsb-h1: dpkg killed (`kill -9`) in the middle of an apt-get install started
over SSH, then a small tmpfs under the environment that fills up during the TensorFlow install
and is then grown. gfsb-h2: two deploys 2 s apart, then a package directory removed from the
environment. Each test asserts that the operator's message names the cause (and the fix), that
one plain re-run recovers the host, and that `pyinfra --dry --json` then plans no change. The
tests run in file order and share the hosts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.spec import NodeSpec
from tests.integration.conftest import REPO, Sandbox, gpufleet, running_sandbox

pytestmark = pytest.mark.integration

H1, H2 = "gfsb-h1", "gfsb-h2"
DEPLOY = "deploy/gpu_node.py"
TIMEOUT_S = 1800
OVERRIDES_ENV = "GPUFLEET_FAULT_OVERRIDES"
# The sandbox inventory, with per-host keys from the environment (host data beats group data).
INVENTORY_TEXT = """\
import json, os
from gpufleet.sandbox.inventory import group_data, host_entries
from gpufleet.sandbox.state import load_state

_state = load_state()
_over = json.loads(os.environ.get("{env}", "{{}}"))
sandbox = (
    [(name, {{**data, **_over.get(name, {{}})}}) for name, data in host_entries(_state)],
    group_data(_state),
)
"""
# Kills dpkg while it unpacks or configures: starts the install detached, waits for a dpkg
# process doing real work, SIGKILLs it and waits for apt-get to give up.
KILL_DPKG = r"""
apt-get update -qq >/dev/null 2>&1
DEBIAN_FRONTEND=noninteractive apt-get install -y dkms >/tmp/apt-killed.log 2>&1 &
apt=$!
while kill -0 "$apt" 2>/dev/null; do
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = dpkg ] || continue
    case $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) in
      *--unpack*|*--configure*)
        sleep 0.5
        kill -9 "${p#/proc/}" 2>/dev/null && echo "killed dpkg ${p#/proc/}" && break 2 ;;
    esac
  done
  sleep 0.1
done
wait "$apt"; echo "apt-get exited $?"
"""


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(2, standins=True) as running:
        yield running


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "inventory.py"
    path.write_text(INVENTORY_TEXT.format(env=OVERRIDES_ENV))
    return path


def pyinfra(
    inventory: Path, *args: str, overrides: dict | None = None, wait: bool = True
) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """The real pyinfra CLI; a dry run goes without `-y` (with it, no change is detected)."""
    env = dict(os.environ, **{OVERRIDES_ENV: json.dumps(overrides or {})})
    confirm = [] if "--dry" in args else ["-y"]
    command = [str(Path(sys.executable).with_name("pyinfra")), *confirm, *args]
    command += [str(inventory), DEPLOY]
    if not wait:
        return subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def planned_changes(inventory: Path, name: str, overrides: dict | None = None) -> list[str]:
    """Operations `pyinfra --dry --json` would change on `name`."""
    proc = pyinfra(inventory, "--dry", "--json", "--limit", name, overrides=overrides)
    assert isinstance(proc, subprocess.CompletedProcess)
    plan = json.loads(proc.stdout)["plan"]
    return [
        op["name"]
        for op in plan
        if name in op["hosts_with_change"] + op["hosts_with_conditional_change"]
    ]


def deploy(inventory: Path, name: str, overrides: dict | None = None):
    proc = pyinfra(inventory, "--limit", name, overrides=overrides)
    assert isinstance(proc, subprocess.CompletedProcess)
    return proc


def drift_args(inventory: Path, name: str) -> list[str]:
    # The deploy named explicitly: the tests do not depend on drift's default path.
    return [str(inventory), "--deploy", str(REPO / DEPLOY), "--no-validation", "--limit", name]


def ok(sandbox: Sandbox, name: str, command: str) -> str:
    result = sandbox.ssh(name, command, timeout=600)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


def site_packages(sandbox: Sandbox, spec: NodeSpec, name: str) -> str:
    return ok(
        sandbox,
        name,
        f"{spec.python_bin} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'",
    ).strip()


@pytest.fixture(scope="module")
def spec(sandbox: Sandbox) -> NodeSpec:
    from gpufleet.sandbox.inventory import group_data

    return NodeSpec.from_host_data(group_data(sandbox.state))


# --- gfsb-h1 --------------------------------------------------------------------------------


def test_dpkg_killed_mid_install_is_repaired_by_the_next_deploy(
    sandbox: Sandbox, inventory: Path
) -> None:
    injected = ok(sandbox, H1, KILL_DPKG)
    assert "killed dpkg" in injected, injected
    audit = sandbox.ssh(H1, "dpkg --audit; ls -A /var/lib/dpkg/updates").stdout
    assert audit.strip(), "the kill left dpkg clean: the fault did not land"
    broken = sandbox.ssh(H1, "apt-get install -y --no-install-recommends jq 2>&1")
    assert "dpkg was interrupted" in broken.stdout  # what the fleet met before gpufleet repaired

    # The plan names the repair, first; drift says what it means.
    changes = planned_changes(inventory, H1)
    assert changes[0].endswith("dpkg repaired (an interrupted dpkg finished before apt runs)")
    report = gpufleet("drift", *drift_args(inventory, H1), check=False)
    assert "dpkg was interrupted" in report.stdout + report.stderr

    started = time.monotonic()
    run = deploy(inventory, H1)
    print(f"\ndeploy after dpkg was killed: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stderr[-6000:]
    assert sandbox.ssh(H1, "dpkg --audit").stdout.strip() == ""
    assert planned_changes(inventory, H1) == []


def test_env_on_a_full_tmpfs_is_refused_then_repaired_once_space_is_back(
    sandbox: Sandbox, inventory: Path, spec: NodeSpec
) -> None:
    # A 300 MB filesystem under the env and the payload (the provisioned env stays below it).
    ok(sandbox, H1, f"mount -t tmpfs -o size=300m gpufleet-fault {spec.env_prefix}")
    try:
        refused = deploy(inventory, H1)
        assert refused.returncode != 0
        assert f"GiB free on {spec.env_prefix} (holding {spec.env_prefix}" in refused.stderr
        assert "Fix: free space there" in refused.stderr

        # Told that less is needed, the deploy runs out of space in the TensorFlow install.
        small = {H1: {"min_free_disk_gib": 0}}
        full = deploy(inventory, H1, overrides=small)
        assert full.returncode != 0
        assert "No space left on device" in full.stderr, full.stderr[-4000:]
        stamp = f"{spec.env_dir}/etc/gpufleet/installed.txt"
        assert sandbox.ssh(H1, f"test -e {stamp}").returncode != 0, "stamp written anyway"

        ok(sandbox, H1, f"mount -o remount,size=6g {spec.env_prefix}")
        started = time.monotonic()
        run = deploy(inventory, H1, overrides=small)
        print(f"\ndeploy after space came back: {time.monotonic() - started:.1f} s")
        assert run.returncode == 0, run.stderr[-6000:]
        ok(sandbox, H1, "gpufleet-python -c 'import tensorflow'")
        assert planned_changes(inventory, H1, overrides=small) == []
    finally:
        sandbox.ssh(H1, f"umount {spec.env_prefix}")


# --- gfsb-h2 --------------------------------------------------------------------------------


def test_a_second_deploy_two_seconds_later_is_refused(sandbox: Sandbox, inventory: Path) -> None:
    first = pyinfra(inventory, "--limit", H2, wait=False)
    assert isinstance(first, subprocess.Popen)
    time.sleep(2)
    second = deploy(inventory, H2)
    _, err = first.communicate(timeout=TIMEOUT_S)
    runs = sorted([(first.returncode, err), (second.returncode, second.stderr)])
    (ok_rc, _), (refused_rc, refused_log) = runs
    assert ok_rc == 0, runs[0][1][-6000:]
    assert refused_rc != 0
    assert f"another gpufleet deploy runs on {H2} (pid " in refused_log, refused_log[-4000:]
    assert "Fix:" in refused_log
    # The lock went with the run that held it; the next run is free and changes nothing.
    assert sandbox.ssh(H2, "test -e /run/gpufleet-deploy.lock").returncode != 0
    assert planned_changes(inventory, H2) == []


def test_a_package_removed_from_the_env_shows_and_is_reinstalled(
    sandbox: Sandbox, inventory: Path, spec: NodeSpec
) -> None:
    ok(sandbox, H2, f"rm -rf {site_packages(sandbox, spec, H2)}/tensorflow")
    changes = planned_changes(inventory, H2)
    assert changes == [
        "gpufleet python_env | pip install TensorFlow from the hashed lock (--require-hashes), "
        "check it imports"
    ]
    report = gpufleet("drift", *drift_args(inventory, H2), check=False)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "installed files missing or damaged" in report.stdout

    started = time.monotonic()
    run = deploy(inventory, H2)
    print(f"\ndeploy after rm -rf site-packages/tensorflow: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stderr[-6000:]
    ok(sandbox, H2, "gpufleet-python -c 'import tensorflow'")
    assert planned_changes(inventory, H2) == []
    assert gpufleet("drift", *drift_args(inventory, H2)).returncode == 0
