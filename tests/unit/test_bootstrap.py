"""scripts/bootstrap refuses a Python below pyproject's requires-python with a clear message
(issue 37 item 5), before it installs anything; python3-venv is among the apt packages."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "bootstrap"
# A python3 of Ubuntu 20.04: its version check (stdin script) fails, and it says 3.8.10.
OLD_PYTHON = '#!/bin/sh\ncase "$1" in -) exit 1;; -c) echo 3.8.10;; esac\nexit 0\n'


def _bin(tmp_path: Path, python: str | None) -> Path:
    """A PATH with what the script's first lines use, and the given python3 (or none)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sed", "dirname", "id"):
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    if python is not None:
        (folder / "python3").write_text(python)
        (folder / "python3").chmod(0o755)
    return folder


def _run(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={"PATH": str(folder)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def minimum() -> str:
    text = (REPO_ROOT / "pyproject.toml").read_text()
    found = re.search(r'^requires-python = ">=([0-9.]+)"', text, flags=re.MULTILINE)
    assert found
    return found[1]


def test_a_python_below_requires_python_is_refused_with_the_fix(tmp_path: Path) -> None:
    proc = _run(_bin(tmp_path, OLD_PYTHON))
    assert proc.returncode == 2
    assert f"is Python 3.8.10; gpufleet needs Python >= {minimum()}" in proc.stderr
    assert "Fix:" in proc.stderr and "installing apt packages" not in proc.stdout


def test_no_python_at_all_is_refused_with_the_fix(tmp_path: Path) -> None:
    proc = _run(_bin(tmp_path, None))
    assert proc.returncode == 2
    assert (
        "python3 not found" in proc.stderr and "apt-get install python3 python3-venv" in proc.stderr
    )


def test_python3_venv_is_an_apt_package_of_bootstrap() -> None:
    lines = (REPO_ROOT / "scripts" / "apt-packages.txt").read_text().splitlines()
    assert "python3-venv" in [line.split("#")[0].strip() for line in lines]


# As root on an OS whose archive lacks chromium (Ubuntu: a snap only): apt-get and friends
# stand in and record their calls; python3 passes the version check and has no venv module, so
# the script stops (exit 2) right after its apt part and makes no .venv.
ROOT_ID = "#!/bin/sh\necho 0\n"
NO_VENV_PYTHON = '#!/bin/sh\ncase "$1" in -) exit 0;; -c) exit 1;; esac\nexit 0\n'
NOT_INSTALLED = "#!/bin/sh\nexit 1\n"
APT_GET = '#!/bin/sh\necho "apt-get $*" >> "$CALLS"\n'
APT_CACHE = '#!/bin/sh\n[ "$3" = chromium ] && exit 100\nexit 0\n'  # `apt-cache show -- NAME`


def test_an_optional_package_the_archive_lacks_is_left_out_not_fatal(tmp_path: Path) -> None:
    folder = _bin(tmp_path, NO_VENV_PYTHON)
    (folder / "id").unlink()
    for name, text in (("id", ROOT_ID), ("dpkg-query", NOT_INSTALLED), ("apt-get", APT_GET),
                       ("apt-cache", APT_CACHE)):  # fmt: skip
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    for tool in ("awk", "grep"):
        (folder / tool).symlink_to(shutil.which(tool) or tool)
    calls = tmp_path / "calls"
    proc = subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={"PATH": str(folder), "CALLS": str(calls)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "no venv/ensurepip" in proc.stderr, proc.stderr
    assert "chromium is not in this OS's apt archive; leaving it out" in proc.stderr
    install = [c for c in calls.read_text().splitlines() if " install " in c]
    assert len(install) == 1 and "python3-venv" in install[0].split()
    assert "chromium" not in install[0].split()
