"""The repository key's shell pieces run by this machine's sh, as a host's root shell runs
them: the fetch script (apt_key.FETCH_KEY, URL on stdin) and the keyring fingerprint fact."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pyinfra.api import StringCommand

from gpufleet.operations.apt_key import FETCH_KEY
from gpufleet.operations.probes import KeyringFingerprints
from gpufleet.operations.stdin import secret_lines


def fetch(url: str, fingerprint: str, dest: Path) -> subprocess.CompletedProcess[str]:
    """The operation's key script: fetch ``url``, keep it at ``dest`` only if it is
    ``fingerprint``'s key."""
    return subprocess.run(
        ["sh", "-c", FETCH_KEY, "gpufleet-key", fingerprint, str(dest)],
        input=secret_lines(url=url),
        capture_output=True,
        text=True,
    )


def keyring_fingerprints(path: Path) -> list[str]:
    """The fingerprints the KeyringFingerprints fact reads from the keyring at ``path``."""
    fact = KeyringFingerprints()
    command = StringCommand(fact.command(path=str(path))).get_raw_value()
    out = subprocess.run(command, shell=True, capture_output=True, text=True, check=True)
    return fact.process(out.stdout.splitlines())
