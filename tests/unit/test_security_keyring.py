"""Finding 1 (security audit): a key file with one more key than the pinned one is refused.

Real gpg, gpgv and curl (file://) on keys made here; the key script is the operation's own.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.operations.helpers import run_operation
from tests.unit.keyring_scripts import fetch, keyring_fingerprints

pytestmark = pytest.mark.skipif(
    not (shutil.which("gpg") and shutil.which("gpgv") and shutil.which("curl")),
    reason="needs gpg, gpgv and curl",
)


def gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args],
        input=stdin,
        check=True,
        capture_output=True,
    ).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, object]:
    """An "expected" key A and an attacker's key B, with a file signed by B."""
    base = tmp_path_factory.mktemp("keys")
    home = base / "gnupg"
    home.mkdir(mode=0o700)
    fprs = {}
    for name in ("A", "B"):
        uid = f"{name} stand-in (gpufleet test) <{name.lower()}@example>"
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
        listing = gpg(home, "--with-colons", "--list-keys", uid).decode()
        fprs[name] = next(line.split(":")[9] for line in listing.splitlines() if line[:4] == "fpr:")
    files = {
        "A.asc": gpg(home, "--armor", "--export", fprs["A"]),
        "AB.asc": gpg(home, "--armor", "--export", fprs["A"], fprs["B"]),
        "AB.bin": gpg(home, "--export", fprs["A"], fprs["B"]),
        "A+B.asc": gpg(home, "--armor", "--export", fprs["A"])
        + gpg(home, "--armor", "--export", fprs["B"]),
    }
    for name, data in files.items():
        (base / name).write_bytes(data)
    data = base / "data"
    data.write_text("Release file stand-in\n")
    sig = base / "data.sig"
    gpg(home, "--local-user", fprs["B"], "--output", str(sig), "--detach-sign", str(data))
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    return {"dir": base, "fpr": fprs, "data": data, "sig": sig}


@pytest.mark.parametrize("name", ["AB.asc", "AB.bin", "A+B.asc"])
def test_finding01_second_key_in_keyring_is_refused(keys, tmp_path, name):
    dest = tmp_path / "keyring.gpg"
    result = fetch((keys["dir"] / name).as_uri(), keys["fpr"]["A"], dest)
    assert result.returncode == 1, result.stderr
    assert "expected exactly one" in result.stderr
    assert keys["fpr"]["B"] in result.stderr
    assert not dest.exists()


def test_finding01_installed_keyring_holds_the_pinned_key_alone(keys, tmp_path):
    dest = tmp_path / "keyring.gpg"
    result = fetch((keys["dir"] / "A.asc").as_uri(), keys["fpr"]["A"], dest)
    assert result.returncode == 0, result.stderr
    assert keyring_fingerprints(dest) == [keys["fpr"]["A"]]
    # What apt does with Signed-By: a signature by the other key does not verify.
    verify = subprocess.run(
        ["gpgv", "--keyring", str(dest), str(keys["sig"]), str(keys["data"])],
        capture_output=True,
        text=True,
    )
    assert verify.returncode != 0
    assert "Good signature" not in verify.stderr


def test_finding01_keyring_with_an_extra_key_is_fetched_again(keys, tmp_path):
    # A keyring left with A and B (by an older gpufleet, or by hand): the fact lists both and
    # the operation replaces the keyring, so a plan (and drift) shows the change.
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    both = tmp_path / "both.gpg"
    both.write_bytes((keys["dir"] / "AB.bin").read_bytes())
    found = keyring_fingerprints(both)
    assert found == [keys["fpr"]["A"], keys["fpr"]["B"]]
    commands, noop = run_operation(
        "apt.repository",
        facts={
            "probes.KeyringFingerprints": {f"path={both}": found},
            "probes.FileDigest": {"path=/etc/apt/sources.list.d/x.sources": None},
        },
        key_url="https://mirror.example/3bf863cc.pub",
        fingerprint=keys["fpr"]["A"],
        keyring=str(both),
        sources="/etc/apt/sources.list.d/x.sources",
        sources_text="Types: deb\nURIs: https://mirror.example/\nSuites: /\n",
    )
    assert noop is None
    assert any("gpufleet-key" in c for c in commands)
