"""The witness a deploy stamp replays instead of pyinfra's DebPackages (``dpkg -l``), both run
by this machine's real dpkg over a made-up /var/lib/dpkg (a folder of this test's, mounted in
a mount namespace of its own): every change to the list changes the witness. Needs root and
unshare(1), as CI has."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pyinfra.facts.deb import DebPackages

from gpufleet.stamp.witnesses import deb_packages
from tests.waiting import pass_a_ctime_tick

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("dpkg") is None,
    reason="mounts a made-up dpkg database in a mount namespace: needs root, unshare and dpkg",
)

# The stanza dpkg writes for an installed package (deb-control(5), dpkg's status file).
STANZA = """\
Package: {name}
Status: install ok installed
Priority: optional
Section: misc
Installed-Size: 10
Maintainer: gpufleet tests <tests@example.com>
Architecture: amd64
Version: {version}
Description: a package of the test
"""


def database(tmp_path: Path, packages: dict[str, str]) -> Path:
    admin = tmp_path / "dpkg"
    (admin / "updates").mkdir(parents=True)
    write_status(admin, packages)
    return admin


def write_status(admin: Path, packages: dict[str, str]) -> None:
    """As dpkg writes it: a new file renamed over the old one."""
    text = "\n".join(STANZA.format(name=n, version=v) for n, v in packages.items())
    (admin / "status-new").write_text(text)
    (admin / "status-new").rename(admin / "status")


def in_namespace(admin: Path, command: str) -> str:
    mount = f'mount --bind {admin} /var/lib/dpkg && exec sh -c "$0"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, command],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def read(admin: Path) -> tuple[object, str]:
    """(DebPackages' value from the real ``dpkg -l``, the witness's output)."""
    listed = in_namespace(admin, "dpkg -l")
    return DebPackages().process(listed.splitlines()), in_namespace(
        admin, deb_packages().get_raw_value()
    )


def _append(admin: Path) -> None:
    with (admin / "status").open("a") as status:
        status.write("\n" + STANZA.format(name="added", version="3.0"))


def _journal(admin: Path) -> None:
    # What dpkg leaves when it is stopped mid-run: a journal entry applied on the next read.
    (admin / "updates" / "0000").write_text(STANZA.format(name="demo", version="1.1-1"))


CHANGES: dict[str, tuple[Callable[[Path], object], bool]] = {
    # change -> whether the list itself changes (the witness must change either way)
    "a package upgraded": (lambda admin: write_status(admin, {"demo": "1.1-1"}), True),
    "a package added in place": (_append, True),
    "a journal entry left": (_journal, True),
    "the same list written again": (lambda admin: write_status(admin, {"demo": "1.0-1"}), False),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_witness_reads_differently_whenever_the_list_could(tmp_path: Path, change: str) -> None:
    admin = database(tmp_path, {"demo": "1.0-1"})
    pass_a_ctime_tick(tmp_path)  # past the change-time clock's tick
    value, witness = read(admin)
    assert value == {"demo": {"1.0-1"}}
    assert read(admin) == (value, witness)  # reading (dpkg -l included) changes nothing
    apply, list_changes = CHANGES[change]
    apply(admin)
    new_value, new_witness = read(admin)
    assert (new_value != value) is list_changes
    assert new_witness != witness
