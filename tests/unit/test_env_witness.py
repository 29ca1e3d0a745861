"""The environment check (EnvProblems) and the witness a deploy stamp replays instead of it,
both run for real here (a venv, this machine's sh, find, sed and stat): every change that
changes the check's answer changes the witness, and what the check never reads does not."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpufleet.operations.env_check import EnvProblems, name_pattern
from tests.waiting import pass_a_ctime_tick

REQUIREMENT = "demo-pkg==1.0"
FILES = {
    "demo/__init__.py": b"x = 1\n" * 50,
    "demo/core.py": b"y = 2\n" * 50,
    "demo/include/api.h": b"int f(void);\n",  # a header: read only to compile against demo
    "../../../bin/demo-tool": b"#!/bin/sh\n",  # RECORD paths may leave site-packages
}


def record_hash(data: bytes) -> str:
    """A RECORD hash as pip writes it: sha256, urlsafe base64 without padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_env(tmp_path: Path, folder: str = "demo_pkg-1.0.dist-info") -> tuple[Path, Path]:
    """A real venv (no pip) holding ``demo-pkg 1.0`` as pip would lay it out, and another
    distribution the check is not asked about; returns (its python, site-packages)."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    info = site / folder
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    rows = []
    for name, data in FILES.items():
        path = (site / name).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{name},{record_hash(data)},{len(data)}")
    rows += ["demo/__pycache__/core.cpython-311.pyc,,", f"{folder}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    other = site / "other-2.0.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 2.0\n")
    (site / "other").mkdir()
    (site / "other/__init__.py").write_text("z = 3\n")
    other_row = "other/__init__.py," + record_hash(b"z = 3\n") + ",6"
    (other / "RECORD").write_text(f"{other_row}\nother-2.0.dist-info/RECORD,,\n")
    # A change time is the kernel's coarse clock: wait for it to move on, so each change below
    # lands on a later tick than the files it changes (as on a host, where the stamp comes long
    # after the install).
    pass_a_ctime_tick(tmp_path)
    return env / "bin" / "python", site


def check(python: Path) -> list[str]:
    command = EnvProblems().command(python=str(python), requirements=[REQUIREMENT])
    done = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True)
    return EnvProblems().process(done.stdout.splitlines())


def witness(python: Path) -> str:
    command = EnvProblems().stamp_witness(python=str(python), requirements=[REQUIREMENT])
    done = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rewrite_same_size(site: Path) -> None:
    (site / "demo/core.py").write_bytes(b"w = 9\n" * 50)


def _swap(site: Path) -> None:
    (site / "demo/core.py").rename(site / "demo/tmp")
    (site / "demo/__init__.py").rename(site / "demo/core.py")
    (site / "demo/tmp").rename(site / "demo/__init__.py")


def _to_link(site: Path) -> None:
    twin = site / "twin.py"
    twin.write_bytes(FILES["demo/core.py"])
    (site / "demo/core.py").unlink()
    (site / "demo/core.py").symlink_to(twin)


def _new_version(site: Path) -> None:
    text = (site / "demo_pkg-1.0.dist-info/METADATA").read_text()
    (site / "demo_pkg-1.0.dist-info/METADATA").write_text(text.replace("1.0", "1.1"))


def _record_size(site: Path) -> None:
    record = site / "demo_pkg-1.0.dist-info/RECORD"
    text = record.read_text()
    record.write_text(re.sub(r"demo/core\.py,[^,]*,300", "demo/core.py,x,3", text))


def _compiled(site: Path) -> None:
    (site / "demo/__pycache__").mkdir()
    (site / "demo/__pycache__/core.cpython-311.pyc").write_bytes(b"\0" * 64)


# change -> whether the witness must read differently after it. The check's own answer is
# computed too: wherever it changes, the witness must change (test below).
CHANGES: dict[str, tuple[Callable[[Path], object], bool]] = {
    "a file truncated": (lambda site: os.truncate(site / "demo/core.py", 10), True),
    "a file rewritten in place, same size": (_rewrite_same_size, True),
    "a file removed": (lambda site: (site / "demo/core.py").unlink(), True),
    "a folder removed": (lambda site: (site / "demo/core.py").rename(site / "elsewhere"), True),
    "two files' names swapped": (_swap, True),
    "a file's mode changed": (lambda site: (site / "demo/core.py").chmod(0o600), True),
    "a file replaced by a link to its twin": (_to_link, True),
    "a script outside site-packages truncated": (
        lambda site: os.truncate(site.parents[2] / "bin/demo-tool", 2),
        True,
    ),
    "the version in METADATA": (_new_version, True),
    "a size in RECORD": (_record_size, True),
    "another version's folder added": (
        lambda site: (site / "demo_pkg-0.9.dist-info").mkdir(),
        True,
    ),
    "a .pth file added": (lambda site: (site / "extra.pth").write_text("/tmp\n"), True),
    "pyvenv.cfg rewritten": (
        lambda site: (site.parents[2] / "pyvenv.cfg").write_text("home = /nowhere\n"),
        True,
    ),
    # Never read by the check:
    "a header truncated": (lambda site: os.truncate(site / "demo/include/api.h", 1), False),
    "files compiled by Python": (_compiled, False),
    "another distribution's file truncated": (
        lambda site: os.truncate(site / "other/__init__.py", 1),
        False,
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_witness_reads_differently_whenever_the_check_could(
    tmp_path: Path, change: str
) -> None:
    python, site = make_env(tmp_path)
    assert check(python) == []
    before_check, before = check(python), witness(python)
    assert witness(python) == before  # nothing changed: the same, run after run
    apply, witness_changes = CHANGES[change]
    apply(site)
    after = witness(python)
    if check(python) != before_check:
        assert after != before, "the check's answer changed but the witness did not"
    assert (after != before) is witness_changes


def test_the_check_leaves_out_headers_and_finds_the_rest(tmp_path: Path) -> None:
    python, site = make_env(tmp_path)
    (site / "demo/include/api.h").unlink()
    assert check(python) == []
    (site / "demo/core.py").unlink()
    assert check(python) == ["broken demo-pkg 1 demo/core.py"]


def test_a_folder_named_in_another_case_is_found_by_both(tmp_path: Path) -> None:
    python, site = make_env(tmp_path, folder="Demo.Pkg-1.0.dist-info")
    assert check(python) == []
    before = witness(python)
    os.truncate(site / "demo/core.py", 10)
    assert check(python) == ["broken demo-pkg 1 demo/core.py"]
    assert witness(python) != before


def test_a_record_with_a_quoted_path_falls_back_to_walking_the_environment(
    tmp_path: Path,
) -> None:
    python, site = make_env(tmp_path)
    record = site / "demo_pkg-1.0.dist-info/RECORD"
    (site / "demo/a,b.py").write_text("q = 1\n")
    record.write_text(record.read_text() + '"demo/a,b.py",sha256=x,6\n')
    pass_a_ctime_tick(tmp_path)
    before = witness(python)
    os.truncate(site / "demo/a,b.py", 1)
    assert check(python) == ["broken demo-pkg 1 demo/a,b.py"]
    assert witness(python) != before


def witness_of(python: Path, requirements: list[str]) -> str:
    command = EnvProblems().stamp_witness(python=str(python), requirements=requirements)
    done = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_with_many_pins_each_distributions_files_are_read(tmp_path: Path) -> None:
    """The witness reads every named distribution in one pass (a lock pins about 40): a file
    of the second one changed, or its RECORD gone, reads differently; a name that finds no
    folder changes nothing."""
    python, site = make_env(tmp_path)
    pins = [REQUIREMENT, "other==2.0", "absent-pkg==3.0"]
    before = witness_of(python, pins)
    assert "./other-2.0.dist-info" in before.splitlines()
    assert witness_of(python, pins) == before
    os.truncate(site / "other/__init__.py", 1)
    after = witness_of(python, pins)
    assert after != before
    (site / "other-2.0.dist-info/RECORD").unlink()  # no RECORD: the whole environment is walked
    pass_a_ctime_tick(tmp_path)
    walked = witness_of(python, pins)
    os.truncate(site / "demo/include/api.h", 1)  # read only by the walk
    assert witness_of(python, pins) != walked


def test_no_pins_reads_only_the_interpreter_and_the_listing(tmp_path: Path) -> None:
    python, site = make_env(tmp_path)
    before = witness_of(python, [])
    os.truncate(site / "demo/core.py", 10)  # a file below the top: not in the listing
    assert witness_of(python, []) == before
    (site / "new.pth").write_text("/tmp\n")
    assert witness_of(python, []) != before


@pytest.mark.parametrize(
    ("requirement", "pattern"),
    [
        ("tensorflow==2.21.0", "tensorflow"),
        ("tensorflow-cpu==2.21.0", "tensorflow*cpu"),
        ("tensorflow[and-cuda]==2.21.0", "tensorflow"),
        ("Zope.Interface__x==1", "Zope*Interface*x"),
    ],
)
def test_name_pattern(requirement: str, pattern: str) -> None:
    assert name_pattern(requirement) == pattern
