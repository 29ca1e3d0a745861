"""The README's quickstart as written, in a fresh clone (issue 37's acceptance): as root, then as
a user with sudo. Each run makes the clone's own .venv (pip's cache helps), brings the sandbox
up, deploys twice, validates, and must exit 0; the fleet is taken down after each.

The README's other command (`scripts/bootstrap && scripts/test`) is CI's own tests phase
(tests/unit/test_readme.py holds the two to be the same line).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, gpufleet

pytestmark = pytest.mark.integration

README = (REPO / "README.md").read_text(encoding="utf-8")
USER = "gfqs-sudo"  # the throwaway user of the sudo case
SUDOERS = Path("/etc/sudoers.d/gpufleet-quickstart-test")
QUICKSTART_S = 3600  # a first .venv, the sandbox, two deploys and a validation


def readme_commands() -> tuple[str, str]:
    """The quickstart lines of the README's sandbox section: as root, and through sudo."""
    section = README.split("## Try it without GPUs: the sandbox", 1)[1].split("\n## ", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in section.splitlines()]
    root = next(line for line in lines if line.startswith("scripts/quickstart"))
    sudo = next(line for line in lines if line.startswith("sudo scripts/quickstart"))
    return root, sudo


@pytest.fixture(scope="module")
def clone() -> Iterator[Path]:
    """A fresh clone of this commit, in a folder every user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="gpufleet-quickstart-"))
    folder.chmod(0o755)
    try:
        subprocess.run(
            ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(folder / "gpufleet")],
            check=True,
            timeout=300,
        )
        yield folder / "gpufleet"
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)
        shutil.rmtree(folder, ignore_errors=True)


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-4000:]}"


def _said_and_done(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, _tail(proc)
    out = proc.stdout
    assert out.index("quickstart will now, without asking:") < out.index("==> Installing")
    for step in ("==> Second run: must change nothing", "==> Validating the fleet", "==> Done"):
        assert step in out, _tail(proc)
    assert re.search(r"^idempotent re-run: \d+ s$", out, flags=re.MULTILINE), _tail(proc)


def test_the_readmes_quickstart_as_root(clone: Path) -> None:
    root, _ = readme_commands()
    gpufleet("sandbox", "down", timeout=300)  # a fleet left by another module
    try:
        proc = subprocess.run(
            ["bash", "-c", root], cwd=clone, capture_output=True, text=True, timeout=QUICKSTART_S
        )
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)
    _said_and_done(proc)


@pytest.fixture
def sudo_user() -> Iterator[str]:
    """A throwaway user allowed sudo without a password; removed afterwards."""
    missing = [t for t in ("sudo", "useradd", "userdel", "runuser") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: no user with sudo to run it as")
    subprocess.run(["userdel", USER], capture_output=True)  # a run cut off before
    subprocess.run(["useradd", "--system", "--shell", "/bin/bash", USER], check=True)
    SUDOERS.write_text(f"{USER} ALL=(root) NOPASSWD: ALL\n")
    SUDOERS.chmod(0o440)
    try:
        yield USER
    finally:
        SUDOERS.unlink(missing_ok=True)
        subprocess.run(["userdel", USER], capture_output=True)


def test_the_readmes_quickstart_as_a_user_with_sudo(clone: Path, sudo_user: str) -> None:
    _, sudo = readme_commands()
    gpufleet("sandbox", "down", timeout=300)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"}
    try:
        proc = subprocess.run(
            ["runuser", "-u", sudo_user, "--", "bash", "-c", f"cd {clone} && {sudo}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=QUICKSTART_S,
        )
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)
    _said_and_done(proc)
