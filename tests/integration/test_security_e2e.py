"""Finding 2 (security audit) on a real host: a local user who pre-creates the temp path that an
older gpufleet uploaded the validation payload to gets nothing from the deploy.

One sandbox host, reached by the real pyinfra CLI over SSH as root. A local account on it,
``mallory``, creates ``/tmp/pyinfra-<sha1>`` (the name pyinfra derives from the payload's
digest, the same in every run) world-writable before the deploy. The payload operation must
install the genuine archive without ever writing to, or reading from, that file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.stages.validation_payload import payload_archive
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, running_sandbox

pytestmark = pytest.mark.integration

DEST = "/opt/gpufleet-sectest/payload/0.1.0"
ATTACKER = "ATTACKER-payload-archive"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(1, standins=False) as running:
        yield running


def test_finding02_local_user_cannot_swap_the_payload(sandbox: Sandbox, tmp_path: Path) -> None:
    archive = payload_archive()
    digest = hashlib.sha256(archive).hexdigest()
    # The name pyinfra's host.get_temp_filename(f"payload-{digest}") gives (sha1, under /tmp).
    trap = "/tmp/pyinfra-" + hashlib.sha1(f"payload-{digest}".encode()).hexdigest()
    prepared = sandbox.ssh(
        0,
        "id mallory >/dev/null 2>&1 || useradd -M mallory; "
        f"rm -f {trap} {trap}.part; "
        f"runuser -u mallory -- sh -c 'umask 0; echo {ATTACKER} > {trap}; "
        f"echo {ATTACKER} > {trap}.part'",
    )
    assert prepared.returncode == 0, prepared.stderr
    deploy = tmp_path / "payload_only.py"
    deploy.write_text(
        "from gpufleet.operations import payload\n"
        "from gpufleet.stages.validation_payload import payload_archive\n"
        f"payload.directory(name='payload', archive=payload_archive(), dest_dir={DEST!r})\n"
    )
    run = pyinfra_cli.deploy("inventories/sandbox.py", deploy=deploy, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    after = sandbox.ssh(
        0,
        f"cat {trap} {trap}.part; stat -c '%U %a' {trap} {trap}.part; "
        f"cat {DEST}/.gpufleet-payload; ls /tmp | grep '^pyinfra-' | grep -v {Path(trap).name}; "
        f"rm -rf /opt/gpufleet-sectest {trap} {trap}.part",
    )
    # mallory's files are as mallory left them: root neither wrote the archive into them nor
    # read one; the genuine archive, checked on the host, is what got installed; and the
    # deploy left no pyinfra temp file of its own.
    assert after.stdout.splitlines() == [ATTACKER, ATTACKER, "mallory 666", "mallory 666", digest]
