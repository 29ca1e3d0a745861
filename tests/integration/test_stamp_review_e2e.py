"""The stamp review's sandbox reproductions (shared/reviews/security-stamp-review.md, issue 35).

Three hosts booted on the provisioned snapshot: a pinned distribution's file rewritten
at the same size is repaired by one re-run (finding 5, the stamp not hiding it); and during the
cluster tier on gfsb-h2 and gfsb-h3, the TF worker port answers the other member and not
gfsb-h1, which is not in the group (finding 2); the run's nft table is gone afterwards; foreign
settings on gfsb-h1 are drift, and those gpufleet owns are removed by one run (finding 8).
(Finding 4, a kernel without the NVIDIA module, has no sandbox form: the sandbox's hosts are
containers without GPUs or kernel modules; tests/unit/test_driver_module.py covers it.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.cluster.config import WORKER_PORT
from gpufleet.spec import NodeSpec
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, first_deploy, running_sandbox
from tests.integration.fault_helpers import (
    INVENTORY_TEXT,
    OVERRIDES_ENV,
    deploy,
    ok,
    planned_changes,
    site_packages,
)
from tests.integration.test_cluster_e2e import start_long_run, training_worker

pytestmark = pytest.mark.integration

H1, H2, H3 = "gfsb-h1", "gfsb-h2", "gfsb-h3"
SANDBOX_INVENTORY = "inventories/sandbox.py"
# A pinned distribution of every lock that is not TensorFlow: six's one module.
PINNED_FILE = "six.py"
# Overwrites the file's first 8 bytes with '#', keeping its size and its mtime.
SAME_SIZE = """import os, sys
p = sys.argv[1]
st = os.stat(p)
data = open(p, "rb").read()
open(p, "r+b").write(b"#" * 8 + data[8:])
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
"""
CONNECT = "python3 -c \"import socket; socket.create_connection(('{address}', {port}), timeout=5)\""


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(3, standins=True, from_snapshot=provisioned) as running:
        first_deploy(SANDBOX_INVENTORY, "--parallel", "3")  # converged, and stamped
        yield running


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stamp-review") / "inventory.py"
    path.write_text(INVENTORY_TEXT.format(env=OVERRIDES_ENV))
    return path


def sha256_on(sandbox: Sandbox, host: str, path: str) -> str:
    return ok(sandbox, host, f"sha256sum {path}").split()[0]


def test_a_pinned_file_rewritten_at_its_size_is_repaired_by_one_rerun(
    sandbox: Sandbox, inventory: Path
) -> None:
    from gpufleet.sandbox.inventory import group_data

    spec = NodeSpec.from_host_data(group_data(sandbox.state))
    path = f"{site_packages(sandbox, spec, H1)}/{PINNED_FILE}"
    before = sha256_on(sandbox, H1, path)
    assert planned_changes(inventory, H1) == []  # stamped: nothing to plan
    # Same size, same mtime: only the content (and the change time) differ.
    ok(sandbox, H1, f"python3 - {path} <<'EOF'\n{SAME_SIZE}EOF")
    assert sha256_on(sandbox, H1, path) != before
    assert planned_changes(inventory, H1) != [], "the check must see a same-size rewrite"
    run = deploy(inventory, H1)
    assert run.returncode == 0, pyinfra_cli.failure(run)
    assert sha256_on(sandbox, H1, path) == before
    assert planned_changes(inventory, H1) == []


def test_the_worker_port_answers_members_only_during_the_cluster_tier(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    proc = start_long_run(tmp_path)  # the group: gfsb-h2 and gfsb-h3
    try:
        training_worker(sandbox, H3)
        target = CONNECT.format(address=sandbox.address(H3), port=WORKER_PORT)
        member = sandbox.ssh(H2, target)
        outsider = sandbox.ssh(H1, target)
        tables = sandbox.ssh(H3, "nft list tables").stdout
    finally:
        proc.terminate()
        proc.communicate(timeout=300)
    assert member.returncode == 0, member.stderr
    assert outsider.returncode != 0, "a host outside the group reached the TF worker port"
    assert "gpufleet_" in tables
    for host in (H2, H3):
        assert "gpufleet_" not in ok(sandbox, host, "nft list tables"), "the table outlived the run"


# Finding 8 on gfsb-h1 (its stamp held before): what another tool or an administrator may add.
EXTRA_SOURCE = "/etc/apt/sources.list.d/extra-cuda.list"
OWN_DROP_IN = "/etc/systemd/system/gpufleet-periodic.service.d/off.conf"
VENDOR_DROP_IN = "/etc/systemd/system/prometheus-node-exporter.service.d/site.conf"


def test_foreign_settings_are_drift_and_those_gpufleet_owns_are_repaired_by_one_run(
    sandbox: Sandbox, inventory: Path
) -> None:
    """Review finding 8 (issue 35 item 8): a second source of NVIDIA's repository and a
    drop-in that turns the periodic checks off are found (the stamp no longer holds), named
    by drift, and removed by one deploy; an override of a vendor's unit is named by drift and
    left to the administrator."""
    from gpufleet.sandbox.inventory import group_data
    from gpufleet.stages.nvidia_repo import source_uri
    from tests.integration.conftest import gpufleet
    from tests.integration.fault_helpers import drift_args

    spec = NodeSpec.from_host_data(group_data(sandbox.state))
    resolution = spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=())
    uri = source_uri(spec, resolution.repo_distro, resolution.repo_arch)
    assert planned_changes(inventory, H1) == []  # stamped: nothing to plan
    ok(
        sandbox,
        H1,
        f"echo 'deb [trusted=yes] {uri} /' > {EXTRA_SOURCE} && "
        f"mkdir -p {Path(OWN_DROP_IN).parent} {Path(VENDOR_DROP_IN).parent} && "
        f"printf '[Service]\\nExecStart=\\nExecStart=/bin/true\\n' > {OWN_DROP_IN} && "
        f"printf '[Service]\\nNice=5\\n' > {VENDOR_DROP_IN} && systemctl daemon-reload",
    )
    report = gpufleet("drift", *drift_args(inventory, H1), "--json", check=False)
    assert report.returncode == 1, report.stdout[-4000:] + report.stderr[-3000:]
    changes = json.loads(report.stdout)["hosts"][H1]["changes"]
    assert any(c.startswith(f"{EXTRA_SOURCE} adds NVIDIA's repository") for c in changes), changes
    assert any(c.startswith(f"{OWN_DROP_IN}: foreign override") for c in changes), changes
    assert any(c.startswith(f"{VENDOR_DROP_IN} overrides") for c in changes), changes
    run = deploy(inventory, H1)
    assert run.returncode == 0, pyinfra_cli.failure(run)
    left = ok(sandbox, H1, f"ls {EXTRA_SOURCE} {OWN_DROP_IN} {VENDOR_DROP_IN} 2>/dev/null || true")
    assert left.split() == [VENDOR_DROP_IN]
    drop_ins = ok(sandbox, H1, "systemctl show -p DropInPaths --value gpufleet-periodic.service")
    assert OWN_DROP_IN not in drop_ins
    assert planned_changes(inventory, H1) == []
    report = gpufleet("drift", *drift_args(inventory, H1), "--json", check=False)
    assert report.returncode == 1  # the vendor's override: still the administrator's to decide
    assert json.loads(report.stdout)["hosts"][H1]["changes"] == [
        f"{VENDOR_DROP_IN} overrides prometheus-node-exporter.service (gpufleet keeps it)"
    ]
    ok(sandbox, H1, f"rm {VENDOR_DROP_IN} && systemctl daemon-reload")
    assert gpufleet("drift", *drift_args(inventory, H1), check=False).returncode == 0
