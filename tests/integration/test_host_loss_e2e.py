"""Issue 11 items 4, 6 and 10 on the sandbox: a host powered off mid-deploy or mid-reboot, a
failed NCCL install, a failed ``apt-get update`` (retried by the next run, never skipped).

gfsb-h1 and gfsb-h4 start bare, gfsb-h2 and gfsb-h3 provisioned (the session's snapshot).
gfsb-h1 and gfsb-h2 are deployed together, and gfsb-h1 is hard-stopped (``gpufleet sandbox
stop --hard``, a power cut) while its dpkg, frozen by the test once it has begun to record its
work, runs "kernel headers and DKMS" in its first deploy; gfsb-h2 must finish, and after
``sandbox start`` one re-run recovers gfsb-h1. gfsb-h2 then reboots (``reboot: always``, a
short ``reboot_timeout_s``) and is hard-stopped during its reboot. gfsb-h3, its NCCL removed,
meets a mirror whose ``libnccl2`` file is gone (404); gfsb-h4 one whose package index is
mid-sync (``apt-get update`` fails, twice, and the repository is never skipped). After each
recovery ``pyinfra --dry --json`` plans no change and ``gpufleet drift`` is clean. The tests
run in file order, sharing hosts.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.sandbox import leader, procs
from gpufleet.sandbox.state import STATE_DIR, load_state
from gpufleet.stages.host_config import SOURCES
from tests.integration.conftest import Sandbox, gpufleet, running_sandbox
from tests.integration.fault_helpers import (
    INVENTORY_TEXT,
    OVERRIDES_ENV,
    drift_args,
    ok,
    planned_changes,
    pyinfra,
)

pytestmark = pytest.mark.integration

H1, H2, H3, H4 = "gfsb-h1", "gfsb-h2", "gfsb-h3", "gfsb-h4"
REPO_OP = "NVIDIA CUDA repository (key fingerprint checked)"


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(4, standins=True, from_snapshot=provisioned, bare=(H1, H4)) as running:
        yield running


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("host-loss") / "inventory.py"
    path.write_text(INVENTORY_TEXT.format(env=OVERRIDES_ENV))
    return path


def run(inventory: Path, *names: str, overrides: dict | None = None, wait: bool = True):
    """The real pyinfra CLI on `names`: a plain ``pyinfra -y INVENTORY deploy/gpu_node.py``."""
    limits = [arg for name in names for arg in ("--limit", name)]
    return pyinfra(inventory, *limits, overrides=overrides, wait=wait)


def netns_inode(name: str) -> int:
    inode = next(h.netns_inode for h in load_state().hosts if h.name == name)
    assert inode is not None, f"{name} has no network namespace recorded"
    return inode


def dpkg_in_dkms_install(inode: int) -> bool:
    """True while the "kernel headers and DKMS" apt-get runs dpkg (unpack or configure)."""
    lines = [procs.cmdline(pid) for pid in leader.netns_processes(inode)]
    apt = any("apt-get" in line and " dkms" in line for line in lines)
    dpkg = any(
        line.startswith("/usr/bin/dpkg ") and ("--unpack" in line or "--configure" in line)
        for line in lines
    )
    return apt and dpkg


def freeze_dpkg_once_it_writes(name: str, inode: int, started: float) -> list[int]:
    """Wait until dpkg has begun to record its work on `name` (an entry in its updates journal,
    seen through the host's root), then stop (SIGSTOP) every dpkg there, so the power cut that
    follows lands mid-install for certain. Returns the frozen PIDs."""
    journal = STATE_DIR / "hosts" / name / "root" / "var/lib/dpkg/updates"
    while not (dpkg_in_dkms_install(inode) and any(journal.iterdir())):
        assert time.monotonic() - started < 900, "dpkg never wrote its journal in the install"
        time.sleep(0.05)
    frozen = [pid for pid in leader.netns_processes(inode) if procs.cmdline(pid).startswith(
        "/usr/bin/dpkg ")]  # fmt: skip
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    return frozen


def nspawn_pid(name: str) -> int | None:
    return procs.read_pid(STATE_DIR / "hosts" / name / "nspawn.pid")


def held_and_installed(sandbox: Sandbox, name: str, prefix: str) -> tuple[set[str], set[str]]:
    """Installed packages named `prefix*`, and the held ones among all packages."""
    listed = ok(sandbox, name, "dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n'")
    # The abbreviation is desired state, then status: "ii" installed, "hi" installed and held.
    installed = {
        line.split()[-1]
        for line in listed.splitlines()
        if line[1:2] == "i" and line.split()[-1].startswith(prefix)
    }
    held = set(ok(sandbox, name, "apt-mark showhold").split())
    return installed, held


def host_lines(log: str, name: str) -> str:
    """What a pyinfra log says about one host (its plan line left out), for a failure message."""
    lines = [line for line in log.splitlines() if f"[{name}]" in line and " plan: " not in line]
    return "\n".join(lines)[-8000:]


def assert_recovered(sandbox: Sandbox, inventory: Path, *names: str) -> None:
    """dpkg clean, TensorFlow importable, no planned change and clean drift on each host."""
    for name in names:
        assert sandbox.ssh(name, "dpkg --audit").stdout.strip() == "", name
        ok(sandbox, name, "gpufleet-python -c 'import tensorflow'")
        assert planned_changes(inventory, name) == [], name
        drift = gpufleet("drift", *drift_args(inventory, name), check=False, timeout=900)
        assert drift.returncode == 0, drift.stdout[-3000:] + drift.stderr[-3000:]


# --- gfsb-h1 and gfsb-h2: item 6 ------------------------------------------------------------


def test_item6_host_hard_stopped_mid_deploy_others_finish_rerun_recovers(
    sandbox: Sandbox, inventory: Path
) -> None:
    started = time.monotonic()
    both = run(inventory, H1, H2, wait=False)
    assert isinstance(both, subprocess.Popen)
    inode = netns_inode(H1)
    while not dpkg_in_dkms_install(inode):
        assert both.poll() is None, "the deploy ended before dpkg ran the DKMS install"
        assert time.monotonic() - started < 900, "dpkg never ran 'kernel headers and DKMS'"
        time.sleep(0.2)
    assert freeze_dpkg_once_it_writes(H1, inode, started), "no dpkg to freeze"
    gpufleet("sandbox", "stop", H1, "--hard")
    cut_at = time.monotonic() - started
    _, log = both.communicate(timeout=1800)
    print(f"\nfirst deploy, {H1} cut at {cut_at:.0f} s: {time.monotonic() - started:.1f} s")
    assert both.returncode != 0
    lost = rf"connection to {H1} lost during '[^']*kernel headers and DKMS'"
    assert re.search(lost, log), log[-6000:]
    assert f"Fix: when {H1} answers SSH again, run the deploy again" in log, log[-6000:]
    # gfsb-h2 went through every operation, the last ones included.
    assert sandbox.ssh(H2, "test -e /run/gpufleet-deploy.lock").returncode != 0
    assert_recovered(sandbox, inventory, H2)

    gpufleet("sandbox", "start", H1)
    # Interrupted as apt means it: a package left half done, or a journal entry dpkg never
    # merged (names of digits alone, debSystem::CheckUpdates); the cut may land between the two.
    dirty = "dpkg --audit; ls /var/lib/dpkg/updates | grep -E '^[0-9]+$'"
    assert sandbox.ssh(H1, dirty).stdout.strip(), "the cut left dpkg clean"
    started = time.monotonic()
    again = run(inventory, H1, H2)
    print(f"re-run after {H1} was back: {time.monotonic() - started:.1f} s")
    assert isinstance(again, subprocess.CompletedProcess)
    assert again.returncode == 0, host_lines(again.stderr, H1)
    assert_recovered(sandbox, inventory, H1, H2)


def test_item6_host_stopped_during_its_reboot_times_out_with_the_message(
    sandbox: Sandbox, inventory: Path
) -> None:
    timeout_s = 15
    reboot = {H2: {"reboot": "always", "reboot_timeout_s": timeout_s}}
    before = nspawn_pid(H2)
    started = time.monotonic()
    deploying = run(inventory, H2, overrides=reboot, wait=False)
    assert isinstance(deploying, subprocess.Popen)
    # The reboot from inside restarts systemd-nspawn; pyinfra waits 10 s before reconnecting.
    while nspawn_pid(H2) in (before, None):
        assert deploying.poll() is None, "the deploy ended without rebooting"
        assert time.monotonic() - started < 300, f"{H2} never rebooted"
        time.sleep(0.1)
    gpufleet("sandbox", "stop", H2, "--hard")
    _, log = deploying.communicate(timeout=600)
    took = time.monotonic() - started
    print(f"\ndeploy with {H2} stopped in its reboot: {took:.1f} s")
    assert deploying.returncode != 0
    said = f"{H2} did not come back within reboot_timeout_s={timeout_s} s"
    assert said in log, log[-6000:]
    assert "Fix: check its console or BMC" in log
    assert "Traceback" not in log and "Unexpected error in Python callback" not in log, log

    gpufleet("sandbox", "start", H2)
    again = run(inventory, H2)
    assert isinstance(again, subprocess.CompletedProcess)
    assert again.returncode == 0, host_lines(again.stderr, H2)
    assert_recovered(sandbox, inventory, H2)


# --- gfsb-h3 and gfsb-h4: items 10 and 4 ----------------------------------------------------


@pytest.fixture(scope="module")
def served(sandbox: Sandbox) -> Path:
    """The folder the stand-in NVIDIA repository is served from."""
    os_id, version = sandbox.state.os  # e.g. ubuntu, 22.04: NVIDIA's folder ubuntu2204
    (release,) = (STATE_DIR / "www" / "nvidia" / f"{os_id}{version.replace('.', '')}").glob(
        "*/Release"
    )
    return release.parent


def repo_uri(sandbox: Sandbox, served: Path) -> str:
    """The repository folder's URL as the hosts' .sources names it."""
    distro_arch = served.relative_to(served.parents[1]).as_posix()
    return f"{sandbox.state.nvidia_repo_url.rstrip('/')}/{distro_arch}/"


def test_item10_failed_nccl_install_leaves_cudnn_held_and_a_rerun_recovers(
    sandbox: Sandbox, inventory: Path, served: Path, tmp_path: Path
) -> None:
    # The provisioned host loses its NCCL, so that the deploy installs it again (its cuDNN
    # stays installed and held, as a first deploy leaves it when NCCL comes next), and apt's
    # download cache with it: the reinstall must fetch from the mirror.
    ok(
        sandbox,
        H3,
        "apt-mark unhold libnccl2 libnccl-dev && apt-get remove -y -q libnccl-dev libnccl2"
        " && rm -f /var/cache/apt/archives/libnccl*.deb",
    )
    # The mirror lost its libnccl2 files (the recorded repository serves several builds): apt
    # gets a 404 for the one the deploy asks for.
    debs = sorted(served.glob("libnccl2_*.deb"))
    assert debs, f"no libnccl2 deb served in {served}"
    for deb in debs:
        shutil.move(deb, tmp_path / deb.name)
    try:
        started = time.monotonic()
        failed = run(inventory, H3)
        print(f"\ndeploy of {H3}, NCCL missing: {time.monotonic() - started:.1f} s")
        assert isinstance(failed, subprocess.CompletedProcess)
        assert failed.returncode != 0
        assert "404" in failed.stderr and "libnccl2" in failed.stderr, failed.stderr[-6000:]
    finally:
        for deb in debs:
            shutil.move(tmp_path / deb.name, deb)
    cudnn, held = held_and_installed(sandbox, H3, "libcudnn")
    nccl, _ = held_and_installed(sandbox, H3, "libnccl")
    assert cudnn, f"cuDNN not installed before NCCL: {host_lines(failed.stderr, H3)}"
    assert cudnn <= held, f"installed but not held: {sorted(cudnn - held)}"
    assert not nccl, nccl

    started = time.monotonic()
    again = run(inventory, H3)
    print(f"re-run of {H3}: {time.monotonic() - started:.1f} s")
    assert isinstance(again, subprocess.CompletedProcess)
    assert again.returncode == 0, again.stderr[-6000:]
    nccl, held = held_and_installed(sandbox, H3, "libnccl")
    assert len(nccl) == 2 and nccl <= held, (nccl, held)
    assert_recovered(sandbox, inventory, H3)


def test_item4_failed_apt_update_leaves_no_sources_and_is_retried(
    sandbox: Sandbox, inventory: Path, served: Path, tmp_path: Path
) -> None:
    # A mirror caught mid-sync: its indexes no longer match the signed Release, so apt-get
    # update fails on them (the signature itself is good). gfsb-h4 is fresh: before the fix,
    # the second run skipped the repository and failed in the driver stage instead.
    indexes = [served / "Packages", served / "Packages.gz"]
    for index in indexes:
        shutil.copy2(index, tmp_path / index.name)
        with index.open("ab") as out:
            out.write(b"\n")
    try:
        for attempt in range(2):
            failed = run(inventory, H4)
            assert isinstance(failed, subprocess.CompletedProcess)
            log = failed.stderr
            assert failed.returncode != 0
            assert f"apt-get update refused {repo_uri(sandbox, served)};" in log, log[-6000:]
            assert f"{SOURCES} was not installed" in log, log[-6000:]
            assert "Unable to locate package" not in log, f"run {attempt + 1}: {log[-6000:]}"
            assert sandbox.ssh(H4, f"test ! -e {SOURCES}").returncode == 0, attempt
            assert any(op.endswith(REPO_OP) for op in planned_changes(inventory, H4))
    finally:
        for index in indexes:
            shutil.copy2(tmp_path / index.name, index)
