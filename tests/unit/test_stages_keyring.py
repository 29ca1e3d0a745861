"""The signing-key script and keyring fact, run for real with gpg and curl on this machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.keyring_scripts import fetch
from tests.unit.keyring_scripts import keyring_fingerprints as fingerprints

# Debian 12's archive signing key, shipped by debian-archive-keyring (a real key with a real,
# published fingerprint: https://ftp-master.debian.org/keys.html, "Debian Stable Release Key
# (12/bookworm)").
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-bookworm-stable.gpg")
DEBIAN_FINGERPRINT = "4D64FEC119C2029067D6E791F8D2585B8783D481"

pytestmark = pytest.mark.skipif(
    not (shutil.which("gpg") and shutil.which("curl") and DEBIAN_KEYRING.exists()),
    reason="needs gpg, curl and Debian's archive keyring (debian-archive-keyring)",
)


@pytest.mark.parametrize("armored", [False, True])
def test_key_with_the_expected_fingerprint_is_installed(tmp_path, armored):
    source = DEBIAN_KEYRING
    if armored:
        source = tmp_path / "key.asc"
        home = tmp_path / "gnupg"
        home.mkdir(mode=0o700)
        subprocess.run(
            ["gpg", "--batch", "--homedir", str(home), "--import", str(DEBIAN_KEYRING)],
            check=True,
            capture_output=True,
        )
        exported = subprocess.run(
            ["gpg", "--batch", "--homedir", str(home), "--armor", "--export"],
            check=True,
            capture_output=True,
        ).stdout
        source.write_bytes(exported)
        # gpg starts an agent for this home: stop it, as nothing else will.
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    dest = tmp_path / "keyrings" / "nvidia.gpg"
    result = fetch(source.as_uri(), DEBIAN_FINGERPRINT, dest)
    assert result.returncode == 0, result.stderr
    assert not dest.read_bytes().startswith(b"-----BEGIN")  # stored de-armored for apt
    assert fingerprints(dest) == [DEBIAN_FINGERPRINT]


def test_key_with_another_fingerprint_is_refused(tmp_path):
    dest = tmp_path / "nvidia.gpg"
    wanted = "EB693B3035CD5710E231E123A4B469963BF863CC"
    result = fetch(DEBIAN_KEYRING.as_uri(), wanted, dest)
    assert result.returncode == 1
    assert f"primary key(s) {DEBIAN_FINGERPRINT}, expected exactly one, {wanted}" in result.stderr
    assert "Fix: check nvidia_repo_key_url" in result.stderr
    assert not dest.exists()


def test_missing_keyring_has_no_fingerprints(tmp_path):
    assert fingerprints(tmp_path / "absent.gpg") == []
