"""The dpkg repair script in a real shell, with dpkg and apt-get stand-ins that keep a state.

The stand-ins act like a host after a power cut during an unpack: one package half-installed,
so ``dpkg --configure -a`` fails on what depends on it until ``apt-get -f install`` reinstalled
it (seen on the sandbox: the re-run after ``sandbox stop --hard`` failed in the repair).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpufleet.operations import dpkg

# $STATE/half: a package is half-installed; $STATE/unconfigured: packages wait for configure;
# $STATE/stuck: nothing repairs the host. Each call is logged to $STATE/calls.
STAND_IN_DPKG = r"""#!/bin/sh
echo "dpkg $*" >> "$STATE/calls"
case "$*" in
  --audit)
    [ -e "$STATE/half" ] && echo "libtsan2:amd64 half-installed"
    [ -e "$STATE/unconfigured" ] && echo "gcc-12 unpacked but not yet configured"
    [ -e "$STATE/stuck" ] && echo "nvidia-dkms-580 failed to configure"
    exit 0 ;;
  *--configure\ -a*)
    [ -e "$STATE/stuck" ] && exit 1
    if [ -e "$STATE/half" ]; then
      echo "dpkg: dependency problems prevent configuration of gcc-12" >&2; exit 1
    fi
    rm -f "$STATE/unconfigured"; exit 0 ;;
esac
exit 2
"""
STAND_IN_APT = r"""#!/bin/sh
echo "apt-get $*" >> "$STATE/calls"
[ -e "$STATE/stuck" ] && exit 100
rm -f "$STATE/half"
exit 0
"""


def repair(
    tmp_path: Path, *conditions: str, journal: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The script with dpkg and apt-get stand-ins, and a dpkg journal folder of its own holding
    `journal` (never this machine's /var/lib/dpkg/updates, which any apt run here changes)."""
    bin_dir, state, updates = tmp_path / "bin", tmp_path / "state", tmp_path / "updates"
    bin_dir.mkdir()
    state.mkdir()
    updates.mkdir()
    for name in journal:
        (updates / name).write_text("Package: gcc-12\nStatus: install ok half-configured\n")
    for name, text in (("dpkg", STAND_IN_DPKG), ("apt-get", STAND_IN_APT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for condition in conditions:
        (state / condition).touch()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state)}
    result = subprocess.run(
        [
            "sh",
            "-c",
            dpkg._REPAIR.replace("/var/lib/dpkg/updates", str(updates)),
            "gpufleet-dpkg-repair",
            "env",
            "apt-get",
            "-y",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return result, [c for c in calls if c != "dpkg --audit"]


def test_half_installed_package_is_reinstalled_then_its_dependents_configured(tmp_path):
    result, calls = repair(tmp_path, "half", "unconfigured")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == [
        "dpkg --force-confdef --force-confold --configure -a",
        "apt-get -y -f install",
        "dpkg --force-confdef --force-confold --configure -a",
    ]


def test_unconfigured_packages_only(tmp_path):
    result, calls = repair(tmp_path, "unconfigured")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "apt-get -y -f install" in calls


def test_clean_host_is_left_alone(tmp_path):
    result, calls = repair(tmp_path)
    assert result.returncode == 0
    assert "nothing to repair" in result.stdout and calls == []


@pytest.mark.parametrize("conditions", [("stuck",), ("stuck", "half")])
def test_a_host_still_unclean_fails_naming_the_package_and_the_fix(tmp_path, conditions):
    result, _ = repair(tmp_path, *conditions)
    assert result.returncode == 1
    assert "nvidia-dkms-580 failed to configure" in result.stderr
    assert "dpkg is still not clean" in result.stderr and "Fix: on the host" in result.stderr


def test_a_journal_entry_alone_makes_dpkg_unclean(tmp_path: Path) -> None:
    result, calls = repair(tmp_path, journal=("0001",))
    assert "dpkg was interrupted" in result.stdout
    assert calls[0] == "dpkg --force-confdef --force-confold --configure -a"


def test_dpkgs_leftover_tmp_file_is_no_journal_entry(tmp_path: Path) -> None:
    """apt counts names of digits alone (debSystem::CheckUpdates); dpkg leaves ``tmp.i``
    behind and removes it itself. Counting it made a clean host "interrupted" at every run."""
    result, calls = repair(tmp_path, journal=("tmp.i",))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing to repair" in result.stdout and calls == []
