"""Issue 31 on the sandbox: Fabric Manager as NVIDIA publishes it from branch 580, end to end.

One provisioned host (the session's snapshot) is declared an NVSwitch system with
``fabric_manager: on`` and deployed against the stand-in repository built from the recorded
repository metadata (gpufleet/matrix/record): from R580 the package is the unsuffixed
``nvidia-fabricmanager`` (``nvidia-fabricmanager-580`` is only a name it provides), installed
with ``libnvidia-nscq`` at the driver's exact version and held; the virtual name is never held
or installed, and a dry run after it plans nothing.

What stands in: no NVSwitch sits on the bus (the key declares one), and the packages are the
stand-ins' (gpufleet/sandbox/standins, from the record), so Fabric Manager's service runs the
stand-in daemon.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gpufleet.sandbox.inventory import group_data
from gpufleet.spec import NodeSpec
from tests.integration.conftest import Sandbox, running_sandbox
from tests.integration.deploy_helpers import pyinfra

pytestmark = pytest.mark.integration

HOST = "gfsb-h1"
NVSWITCH = ("--data", "fabric_manager=on", "--limit", HOST)


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(1, standins=True, from_snapshot=provisioned) as running:
        yield running


def test_the_real_fabric_manager_package_is_installed_held_and_the_virtual_name_never(
    sandbox: Sandbox,
) -> None:
    run = pyinfra(*NVSWITCH, refuse="")
    assert run.returncode == 0 and run.errors() == {}, run.log[-6000:]
    data = {**group_data(sandbox.state), "fabric_manager": "on"}
    resolution = NodeSpec.from_host_data(data).resolve(
        os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=()
    )
    assert resolution.driver_branch >= 580, resolution.driver_branch
    listed = sandbox.ssh(HOST, "dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n'")
    installed = {
        line.split()[0]: line.split()[1]
        for line in listed.stdout.splitlines()
        if line.split()[2:3] == ["ii"] or line.split()[2:3] == ["hi"]
    }
    for package in ("nvidia-fabricmanager", "libnvidia-nscq"):
        version = installed.get(package, "")
        assert version.startswith(resolution.driver_version), (package, version, resolution)
    held = set(sandbox.ssh(HOST, "apt-mark showhold").stdout.split())
    assert {"nvidia-fabricmanager", "libnvidia-nscq"} <= held, held
    assert "nvidia-fabricmanager-580" not in held | set(installed)
    active = sandbox.ssh(HOST, "systemctl is-active nvidia-fabricmanager").stdout.strip()
    assert active == "active", active
    again = pyinfra("--dry", *NVSWITCH, refuse="")
    changing = {op["name"]: op["hosts_with_change"] for op in again.report["plan"]}
    assert not {name for name, hosts in changing.items() if hosts}, json.dumps(changing)[-3000:]
