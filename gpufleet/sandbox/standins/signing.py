"""A throwaway GPG key that signs the stand-in repository once and is then thrown away."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpufleet.sandbox.standins.model import STANDIN, StandinError

KEY_UID = f"{STANDIN} repository key, made at sandbox up <gpufleet-sandbox@localhost.invalid>"


@dataclass(frozen=True)
class ThrowawayKey:
    """A key living in a temporary GNUPGHOME; ``fingerprint`` is 40 hex digits."""

    home: Path
    fingerprint: str

    def gpg(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run ``gpg`` on this key's home, raising `StandinError` with gpg's message on failure."""
        return _gpg(self.home, *args, stdin=stdin)

    def export(self, keyring: Path, armored: Path) -> None:
        """Write the public key as a binary keyring (for Signed-By) and as armored text."""
        keyring.write_bytes(self.gpg("--export", self.fingerprint))
        armored.write_bytes(self.gpg("--armor", "--export", self.fingerprint))

    def sign_release(self, release: Path) -> None:
        """Write ``InRelease`` (clear-signed) and ``Release.gpg`` (detached) beside ``release``."""
        common = ["--local-user", self.fingerprint, "--digest-algo", "SHA256", "--yes"]
        inrelease = release.with_name("InRelease")
        detached = release.with_name("Release.gpg")
        self.gpg(*common, "--clearsign", "--output", str(inrelease), str(release))
        self.gpg(*common, "--armor", "--detach-sign", "--output", str(detached), str(release))


@contextmanager
def throwaway_key() -> Iterator[ThrowawayKey]:
    """Make an Ed25519 signing key in a temporary GNUPGHOME; remove it (and its agent) after.

    Example::

        with throwaway_key() as key:
            key.sign_release(repo / "Release")
    """
    if shutil.which("gpg") is None:
        raise StandinError("gpg is missing. Fix: apt-get install gnupg")
    # A short path: gpg-agent's socket path must fit in 108 bytes.
    home = Path(tempfile.mkdtemp(prefix="gfsb-gpg-"))
    try:
        home.chmod(0o700)
        _gpg(home, "--passphrase", "", "--quick-generate-key", KEY_UID, "ed25519", "sign", "never")
        listing = _gpg(home, "--with-colons", "--list-secret-keys").decode()
        fingerprints = [
            line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")
        ]
        if not fingerprints:
            raise StandinError(f"gpg made no key in {home}: {listing.strip()}")
        yield ThrowawayKey(home, fingerprints[0])
    finally:
        # gpg started an agent for this home; stop it before the home goes away.
        subprocess.run(
            ["gpgconf", "--kill", "all"],
            env={**os.environ, "GNUPGHOME": str(home)},
            capture_output=True,
            check=False,
        )
        shutil.rmtree(home, ignore_errors=True)


def _gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    command = ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", *args]
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, check=True)
    except subprocess.CalledProcessError as exc:
        raise StandinError(
            f"{' '.join(command)} failed: {exc.stderr.decode(errors='replace').strip()}"
        ) from exc
    return done.stdout
