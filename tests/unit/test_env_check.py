"""What the environment check covers (review finding 5): every pin of the lock by version, every
RECORD sha256, markers read on the host, and .pth files no distribution recorded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import packaging

from gpufleet.matrix import locks
from gpufleet.operations.env_check import EnvProblems, checked_pins, stray_pth
from tests.unit.test_env_witness import FILES, REQUIREMENT, check, make_env, witness

HASH = "--hash=sha256:" + "1" * 64


def check_of(python: Path, requirements: list[str]) -> list[str]:
    command = EnvProblems().command(python=str(python), requirements=requirements)
    done = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True)
    return EnvProblems().process(done.stdout.splitlines())


def test_a_same_size_rewrite_is_found_by_its_sha256(tmp_path: Path) -> None:
    python, site = make_env(tmp_path)
    before = witness(python)
    (site / "demo/core.py").write_bytes(b"w = 9\n" * 50)  # the size RECORD holds
    assert len(FILES["demo/core.py"]) == (site / "demo/core.py").stat().st_size
    assert check(python) == ["broken demo-pkg 1 demo/core.py"]
    assert witness(python) != before  # the stamp's cheap check sees it too


def test_every_pin_is_checked_by_version_markers_read_on_the_host(tmp_path: Path) -> None:
    python, site = make_env(tmp_path)
    assert check_of(python, ["absent==1; python_version < '3'"]) == [
        "unchecked absent (no packaging module to read its marker)"  # fails closed
    ]
    # What a real environment has (pip vendors it): the check reads markers with it.
    shutil.copytree(Path(packaging.__file__).parent, site / "packaging")
    assert check_of(python, [REQUIREMENT, "other==2.0"]) == []
    assert check_of(python, [REQUIREMENT, "other==2.1"]) == ["version other 2.0"]
    assert check_of(python, ["absent==1; python_version < '3'"]) == []  # not for this host
    assert check_of(python, ["absent==1; python_version >= '3'"]) == ["missing absent"]


def test_a_pth_file_no_distribution_recorded_is_named(tmp_path: Path) -> None:
    python, site = make_env(tmp_path)
    (site / "zz-startup.pth").write_text("import os\n")
    assert check(python) == [f"pth {site / 'zz-startup.pth'}"]
    record = site / "other-2.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "zz-startup.pth,,\n")  # now a package's own
    assert check(python) == []


def test_checked_pins_are_every_pin_of_the_lock() -> None:
    lock = (
        f"tensorflow==2.21.0 {HASH}\nnumpy==2.2.6 ; python_full_version == '3.10.*' {HASH}\n"
        f"nvidia-cudnn-cu12==9.3.0.75 {HASH}\n"
    )
    assert checked_pins("tensorflow[and-cuda]==2.21.0", locks.parse_lock(lock)) == [
        "tensorflow==2.21.0",
        "numpy==2.2.6; python_full_version == '3.10.*'",
        "nvidia-cudnn-cu12==9.3.0.75",
    ]


def test_only_pth_files_inside_the_environment_are_removed() -> None:
    python = "/opt/gpufleet/venvs/tf/bin/python"
    inside = "/opt/gpufleet/venvs/tf/lib/python3.11/site-packages/x.pth"
    problems = [
        f"pth {inside}",
        "pth /usr/lib/python3/dist-packages/y.pth",  # not this environment's
        "pth /opt/gpufleet/venvs/tf/lib/python3.11/site-packages/../../../../etc/z.pth",
        "pth /opt/gpufleet/venvs/tf/lib/python3.11/site-packages/a b.pth",
        "broken demo 1 demo/core.py",
    ]
    assert stray_pth(python, problems) == [inside]
