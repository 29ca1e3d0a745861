"""Findings 8 and 9 (security audit), the acceptance check: credentials in every URL key are
never printed by the real pyinfra CLI (plan and apply, ``-vv --debug``), and files holding
them are written mode 600.

The hosts are ``@fake`` ones (tests/unit/fake_fleet.py): pyinfra's own CLI, operations and
output code run for real; only the host's answers are canned.
"""

from __future__ import annotations

import re

import pytest

from gpufleet.stages import nvidia_repo
from tests.unit.fake_fleet import FakeGpuHost, write_inventory
from tests.unit.test_deploy_run import run_pyinfra

SECRETS = {
    "apt_proxy": "http://PXUSER:PXPASS1@proxy.example:3128",
    "pip_index_url": "https://PIUSER:PIPASS2@pypi.example/simple?token=PITOKEN3",
    "nvidia_repo_url": "https://RPUSER:RPPASS4@mirror.example/cuda",
    "nvidia_repo_key_url": "https://KYUSER:KYPASS5@mirror.example/k.pub?token=KYTOKEN6",
    "miniforge_url": "https://MFUSER:MFPASS7@mirror.example/Miniforge3.sh?sig=MFTOKEN8",
    "conda_channel_url": "https://CCUSER:CCPASS0@conda-mirror.example",
}
# A login without a password (a token as the user name): not masked by older gpufleet.
TOKEN_ONLY = {"apt_proxy": "http://PXTOKEN9@proxy.example:3128"}
WORDS = re.findall(
    r"[A-Z]{2}(?:USER|PASS\d|TOKEN\d)", " ".join([*SECRETS.values(), *TOKEN_ONLY.values()])
)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    path = tmp_path_factory.mktemp("secrets") / "inventory.py"
    hosts = {
        "mirrored": FakeGpuHost(inventory=dict(SECRETS)),
        "token-proxy": FakeGpuHost(inventory=dict(TOKEN_ONLY)),
    }
    return write_inventory(path, hosts)


@pytest.mark.parametrize("mode", [["--dry"], ["-y"]], ids=["plan", "apply"])
def test_finding08_no_credential_is_printed(inventory, mode):
    assert len(WORDS) == 16
    result = run_pyinfra(inventory, *mode, "-vv", "--debug")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "gpufleet nvidia_repo" in output  # the stages ran
    leaked = [word for word in WORDS if word in output]
    assert leaked == []


def test_finding08_files_with_credentials_are_written_mode_600(inventory):
    result = run_pyinfra(inventory, "-y", "-vv")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    # files.content's writer: `... gpufleet-write PATH MODE`; apt's login and proxy files.
    blocks = re.split(r"\n(?=\[@fake/)", output)  # -vv: one block per printed command
    mirrored = "\n".join(b for b in blocks if b.startswith("[@fake/mirrored]"))
    writes = dict(re.findall(r"gpufleet-write (\S+) (\d+)", mirrored))
    assert writes[nvidia_repo.APT_AUTH] == "600"
    assert writes[nvidia_repo.APT_PROXY] == "600"
    assert writes["/opt/gpufleet/miniforge3/.condarc"] == "600"  # conda_channel_url's login
