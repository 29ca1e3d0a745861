"""Shell scripts gpufleet runs on hosts, run here by a real sh: the deploy lock (issue 11, item
8; real flock) and apt's install retry (item 9, against a stand-in apt-get)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from gpufleet.operations import apt, apt_bounded, lock

# --- 8. the host-side deploy lock (real sh, real flock) -----------------------------------


def _lock_run(script: str, lock_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script, "gpufleet-lock", str(lock_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _starttime(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


BOOT = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_lock_refuses_a_second_deploy_while_the_first_runs(tmp_path):
    lock_file = tmp_path / "deploy.lock"
    other = subprocess.Popen(["sleep", "60"])  # stands for the first deploy's sshd session
    try:
        lock_file.write_text(f"{other.pid} {_starttime(other.pid)} {BOOT} 2026-12-01T10:00:00Z\n")
        refused = _lock_run(lock._TAKE, lock_file, "gpu-a")
        assert refused.returncode == 1
        assert (
            f"another gpufleet deploy runs on gpu-a (pid {other.pid}, since 2026-12-01T10:00:00Z)"
            in refused.stderr
        )
        assert "Fix:" in refused.stderr
        # Not ours: releasing leaves it.
        assert _lock_run(lock._RELEASE, lock_file).returncode == 0
        assert lock_file.read_text().startswith(f"{other.pid} ")
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("stale", ["dead pid", "other boot", "pid reused"])
def test_lock_takes_over_a_stale_lock_and_releases_its_own(tmp_path, stale):
    lock_file = tmp_path / "deploy.lock"
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "60"])  # a live process that is not that deploy
    pid, start, boot = gone.pid, "12345", BOOT
    if stale != "dead pid":
        pid, start = alive.pid, _starttime(alive.pid)
        if stale == "other boot":
            boot = "00000000-0000-0000-0000-000000000000"
        else:
            start = str(int(start) + 1)
    lock_file.write_text(f"{pid} {start} {boot} 2026-12-01T09:00:00Z\n")
    try:
        taken = _lock_run(lock._TAKE, lock_file, "gpu-a")
    finally:
        alive.kill()
        alive.wait()
    assert taken.returncode == 0, taken.stderr
    assert "taking over a stale deploy lock" in taken.stdout
    holder, _, holder_boot, _ = lock_file.read_text().split()
    assert holder_boot == BOOT and holder != str(pid)
    # The same session (this test's process) releases it.
    assert _lock_run(lock._RELEASE, lock_file).returncode == 0
    assert not lock_file.exists()


# --- 9. apt retries only when it did not know a package ---------------------------------


STAND_IN_APT = """\
#!/bin/sh
# Stand-in for apt-get: logs its calls, fails the first install as told by $SCENARIO.
echo "$*" >> "$CALLS"
case "$*" in
  *update*) exit 0 ;;
esac
if [ ! -e "$CALLS.failed" ]; then
  touch "$CALLS.failed"
  case $SCENARIO in
    unknown) echo "E: Unable to locate package dkms"; exit 100 ;;
    version) echo "E: Version '2.27.7-1+cuda12.9' for 'libnccl2' was not found"; exit 100 ;;
    lock) echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 45"
          exit 100 ;;
    interrupted) echo "E: dpkg was interrupted, you must manually run 'dpkg --configure -a'"
          exit 100 ;;
  esac
fi
echo "installed"
"""


@pytest.mark.parametrize(
    ("scenario", "retried", "rc"),
    [("unknown", True, 0), ("version", True, 0), ("lock", False, 100), ("interrupted", False, 100)],
)
def test_install_retries_only_for_an_unknown_package(tmp_path, scenario, retried, rc):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "apt-get"
    stand_in.write_text(STAND_IN_APT)
    stand_in.chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SCENARIO": scenario}
    env["CALLS"] = str(calls)
    result = subprocess.run(
        ["sh", "-c", apt_bounded.INSTALL_RETRYING, "x", "5", "20", "apt-get", "install", "dkms"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    logged = calls.read_text().splitlines()
    assert result.returncode == rc, result.stdout + result.stderr
    assert any(line.startswith("update ") for line in logged) == retried, logged
    assert len(logged) == (3 if retried else 1), logged


def test_apt_waits_for_the_dpkg_lock():
    assert f"DPkg::Lock::Timeout={apt.APT_LOCK_TIMEOUT_S}" in apt.APT_GET
    assert apt.APT_LOCK_TIMEOUT_S >= 60


def test_scripts_are_valid_sh():
    for script in (lock._TAKE, lock._RELEASE, apt_bounded.INSTALL_RETRYING, apt_bounded.UPDATE):
        subprocess.run(["sh", "-n", "-c", textwrap.dedent(script)], check=True)
