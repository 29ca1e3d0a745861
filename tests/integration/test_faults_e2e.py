"""Faults of issue 11 injected on the sandbox the way they happen, each recovered by one re-run.

Two provisioned hosts (booted on the session's provisioned snapshot). gfsb-h1: dpkg killed
(`kill -9`) in the middle of an install started over SSH, while a package's maintainer script
holds it there, then a small tmpfs under the environment that fills up during the TensorFlow
install and is then grown. gfsb-h2: a deploy while another run holds the host's deploy lock,
then a package directory removed from the environment. Each test asserts that the operator's
message names the cause (and the fix), that one plain re-run recovers the host, and that
`pyinfra --dry --json` then plans no change. The tests run in file order and share the hosts.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.operations import lock
from gpufleet.spec import NodeSpec
from tests.integration.conftest import Sandbox, gpufleet, running_sandbox
from tests.integration.fault_helpers import (
    INVENTORY_TEXT,
    OVERRIDES_ENV,
    deploy,
    drift_args,
    ok,
    planned_changes,
    site_packages,
)

pytestmark = pytest.mark.integration

H1, H2 = "gfsb-h1", "gfsb-h2"
# Kills dpkg in the middle of an install, deterministically: a package whose postinst blocks
# (the first time it runs) holds dpkg in its configure step; once the script says it started,
# dpkg is killed, as a lost session or an OOM kill would. The package is built on the host.
HOLD_PACKAGE = "gpufleet-fault-hold"
KILL_DPKG = r"""
set -e
d=$(mktemp -d)
mkdir -p "$d/pkg/DEBIAN"
printf '%s\n' 'Package: PKG' 'Version: 1.0' 'Architecture: all' \
  'Maintainer: gpufleet tests <tests@localhost>' \
  'Description: holds dpkg in its postinst until the test kills dpkg' > "$d/pkg/DEBIAN/control"
printf '%s\n' '#!/bin/sh' '[ -e /run/gf-postinst-started ] && exit 0' \
  'echo $$ > /run/gf-postinst-started' 'exec sleep 600' > "$d/pkg/DEBIAN/postinst"
chmod 755 "$d/pkg/DEBIAN/postinst"
dpkg-deb --build "$d/pkg" "$d/hold.deb" >/dev/null
rm -f /run/gf-postinst-started
dpkg -i "$d/hold.deb" >/tmp/dpkg-killed.log 2>&1 &
dpkg=$!
for _ in $(seq 600); do [ -s /run/gf-postinst-started ] && break; sleep 0.1; done
[ -s /run/gf-postinst-started ] || { echo "the postinst never started"; exit 1; }
kill -9 "$dpkg" && echo "killed dpkg $dpkg"
kill -9 "$(cat /run/gf-postinst-started)"
wait "$dpkg" || true
""".replace("PKG", HOLD_PACKAGE)
# Holds the host's deploy lock as a deploy would (gpufleet.operations.lock's own script, run in
# this SSH session) until the test ends the session.
HOLD_LOCK = "sh -c {take} gpufleet-lock {lock} {host} && echo held && exec sleep 600"


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(2, standins=True, from_snapshot=provisioned) as running:
        yield running


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "inventory.py"
    path.write_text(INVENTORY_TEXT.format(env=OVERRIDES_ENV))
    return path


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
    audit = sandbox.ssh(H1, "dpkg --audit").stdout
    assert HOLD_PACKAGE in audit, f"the kill left dpkg clean: the fault did not land: {audit}"
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


def test_a_deploy_while_another_holds_the_lock_is_refused(
    sandbox: Sandbox, inventory: Path
) -> None:
    """The lock is held by the test (the deploy lock's own script in an SSH session that stays
    open), so the deploy meets it for certain; once that session ends, the lock is stale and
    the next run takes it over, finishes and leaves no lock behind."""
    hold = HOLD_LOCK.format(take=shlex.quote(lock._TAKE), lock=lock.LOCK, host=H2)
    holder = sandbox.ssh_popen(H2, hold)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held", holder.stderr
        refused = deploy(inventory, H2)
        assert refused.returncode != 0
        message = refused.stderr
        assert f"another gpufleet deploy runs on {H2} (pid " in message, message[-4000:]
        assert "Fix:" in message
    finally:
        holder.kill()
        holder.wait(30)
    run = deploy(inventory, H2)
    assert run.returncode == 0, run.stderr[-6000:]
    # The lock went with the run that held it; the next run is free and changes nothing.
    assert sandbox.ssh(H2, f"test -e {lock.LOCK}").returncode != 0
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
