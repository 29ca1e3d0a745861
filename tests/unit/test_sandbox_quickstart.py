"""scripts/quickstart works as root without sudo and as another user through sudo (issue 11
item 15): run by a real shell as an unprivileged user, with a stand-in `sudo` or none at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "quickstart"
README = (REPO / "README.md").read_text(encoding="utf-8")

# Stands in for sudo: records how it was called and runs nothing.
STAND_IN_SUDO = '#!/bin/sh\necho "stand-in sudo called with: $*"\n'


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's tmp_path is root-only)."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-quickstart-") as name:
        os.chmod(name, 0o755)
        yield Path(name)


def _bin(tmp_path: Path, sudo: bool) -> Path:
    """A PATH holding only what the script's root check uses (and sudo, when asked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bin_dir.chmod(0o755)
    for tool in ("id", "dirname"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    if sudo:
        (bin_dir / "sudo").write_text(STAND_IN_SUDO)
        (bin_dir / "sudo").chmod(0o755)
    return bin_dir


def _run_unprivileged(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    command = ["/bin/bash", str(SCRIPT), "3"]
    if os.geteuid() == 0:  # drop to nobody, so the script sees a non-root user
        command = [
            str(shutil.which("setpriv")),
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            *command,
        ]
    return subprocess.run(
        command, env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=30
    )


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="no setpriv")
def test_a_non_root_user_is_sent_through_sudo_with_the_same_arguments(open_dir: Path) -> None:
    proc = _run_unprivileged(_bin(open_dir, sudo=True))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"stand-in sudo called with: -- {SCRIPT} 3"
    assert "running it again with sudo" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="no setpriv")
def test_without_sudo_a_non_root_user_is_told_to_run_it_as_root(open_dir: Path) -> None:
    proc = _run_unprivileged(_bin(open_dir, sudo=False))
    assert proc.returncode == 2
    assert "sudo is not installed: run it as root" in proc.stderr
    assert "command not found" not in proc.stderr


def test_readme_shows_both_forms() -> None:
    assert "\nscripts/quickstart " in README and "\nsudo scripts/quickstart " in README


def test_the_plan_names_every_package_and_service_and_the_teardown() -> None:
    # Issue 37 item 5: the quickstart says what it will install and start, and asks nothing.
    proc = subprocess.run(
        ["/bin/bash", str(SCRIPT), "--plan", "2"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    packages = [
        line.split("#")[0].strip()
        for line in (REPO / "scripts" / "apt-packages.txt").read_text().splitlines()
    ]
    shown = proc.stdout.split()
    assert [p for p in packages if p and p not in shown] == []
    for said in ("sshd (port 22)", "apt-cacher-ng (port 3142)", "prometheus (port 9090)",
                 "TensorFlow", "gpufleet sandbox down", "start 2 sandbox hosts"):  # fmt: skip
        assert said in proc.stdout, said


def test_the_plan_comes_before_anything_is_installed_and_nothing_is_asked() -> None:
    body = SCRIPT.read_text()
    assert body.index('\nplan "$hosts"') < body.index("\nscripts/bootstrap")
    assert not any(line.strip().startswith("read ") for line in body.splitlines())
