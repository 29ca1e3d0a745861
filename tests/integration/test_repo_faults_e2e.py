"""Issue 11 items 4 and 5 on a real host: the stand-in repository re-signed by another key.

One sandbox host, provisioned by the real pyinfra CLI. The served repository's ``InRelease``
and ``Release.gpg`` are re-signed with a new throwaway key (the published key and the pin stay),
first before the host ever saw the repository (fault 7c), then on the provisioned host (7d).
Each time the deploy must fail with gpufleet's message naming both keys; on the fresh host the
``.sources`` must not be installed (so the re-run fails the same way, not in the driver stage);
on the provisioned one drift must report it. Once the original signatures are back, one plain
re-run recovers and ``--dry --json`` shows no change. The tests run in file order.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from gpufleet.drift.sentences import sentence_for
from gpufleet.sandbox.standins.signing import throwaway_key
from gpufleet.sandbox.state import STATE_DIR
from gpufleet.stages.host_config import SOURCES
from gpufleet.stages.nvidia_repo import SIGNED_OPERATION
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, gpufleet, running_sandbox

pytestmark = pytest.mark.integration

HOST = "gfsb-h1"
INVENTORY = "inventories/sandbox.py"
SIGNATURES = ("InRelease", "Release.gpg")


def deploy(*args: str) -> tuple[int, dict | None, str]:
    """The real pyinfra CLI: exit status, JSON report (None when it printed none), log."""
    proc = pyinfra_cli.deploy(INVENTORY, "--json", *args)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = None
    return proc.returncode, report, proc.stdout[-4000:] + proc.stderr[-8000:]


def planned_changes(report: dict | None) -> list[str]:
    """What a dry run's report plans on HOST; a run that printed no plan is a failure, never
    "no change"."""
    assert report is not None and "plan" in report, f"pyinfra printed no plan: {report}"
    return [
        op["name"]
        for op in report["plan"]
        if HOST in op["hosts_with_change"] + op["hosts_with_conditional_change"]
    ]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(1, standins=True) as running:
        yield running


@pytest.fixture(scope="module")
def repo(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The served repository folder and a copy of its genuine signatures."""
    # The stand-in repository serves every distro the sandbox has built for (22.04, 20.04, ...):
    # the one of this sandbox's OS, as NVIDIA names it (ubuntu2204).
    os_id, version = sandbox.state.os
    served = STATE_DIR / "www" / "nvidia" / f"{os_id}{version.replace('.', '')}"
    (release,) = served.glob("*/Release")
    saved = tmp_path_factory.mktemp("signatures")
    for name in SIGNATURES:
        shutil.copy2(release.with_name(name), saved / name)
    return {"release": release, "saved": saved, "pinned": sandbox.state.nvidia_repo_key_fingerprint}


def resign(repo: dict) -> str:
    """Re-sign the served Release with a new key; its fingerprint."""
    with throwaway_key() as key:
        key.sign_release(repo["release"])
        return key.fingerprint


def restore(repo: dict) -> None:
    for name in SIGNATURES:
        shutil.copy2(repo["saved"] / name, repo["release"].with_name(name))


def assert_names_both_keys(log: str, new: str, pinned: str) -> None:
    assert f"is signed by key {new}" in log, log
    assert f"nvidia_repo_key_fingerprint pins {pinned}" in log, log
    assert "set nvidia_repo_key_url" in log, log


def test_item4_fresh_host_rotated_repo_is_never_recorded_as_configured(
    sandbox: Sandbox, repo: dict
) -> None:
    new = resign(repo)
    try:
        for _ in range(2):  # the second run must fail the same way, not skip the repository
            rc, _report, log = deploy()
            assert rc != 0
            assert_names_both_keys(log, new, repo["pinned"])
            assert "Unable to locate package" not in log, log
            assert sandbox.ssh(HOST, f"test ! -e {SOURCES}").returncode == 0
    finally:
        restore(repo)
    rc, _report, log = deploy()
    assert rc == 0, log


def test_item5_provisioned_host_rotated_repo_fails_the_deploy_and_drift(
    sandbox: Sandbox, repo: dict
) -> None:
    new = resign(repo)
    try:
        rc, _report, log = deploy()
        assert rc != 0
        assert_names_both_keys(log, new, repo["pinned"])
        drift = gpufleet("drift", INVENTORY, "--no-validation", "--json", check=False, timeout=900)
        assert drift.returncode == 1, drift.stdout[-3000:] + drift.stderr[-3000:]
        changes = json.loads(drift.stdout)["hosts"][HOST]["changes"]
        assert sentence_for(SIGNED_OPERATION) in changes, changes
    finally:
        restore(repo)
    rc, _report, log = deploy()
    assert rc == 0, log
    rc, report, log = deploy("--dry")
    assert rc == 0 and planned_changes(report) == [], log
    drift = gpufleet("drift", INVENTORY, "--no-validation", "--json", check=False, timeout=900)
    assert drift.returncode == 0, drift.stdout[-3000:] + drift.stderr[-3000:]
