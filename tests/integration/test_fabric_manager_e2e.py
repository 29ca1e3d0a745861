"""Issue 31 on the sandbox: Fabric Manager as NVIDIA publishes it from branch 580, end to end.

One provisioned host (the session's snapshot) boots as an NVSwitch system: its
/sys/bus/pci/devices is the NVSwitch bridges of a recorded HGX H100 listing (NVIDIA's Fabric
Manager guide; gpufleet/sandbox/records/pci), mounted read-only by `sandbox up --pci-record`.
With ``fabric_manager`` left at ``auto`` (inventories/group_data/all.py) the deploy finds the
switches on the bus itself and installs, against the stand-in repository built from the
recorded repository metadata (gpufleet/matrix/record), the unsuffixed ``nvidia-fabricmanager``
from R580 on (``nvidia-fabricmanager-580`` is only a name it provides) with ``libnvidia-nscq``,
both at the driver's exact version and held; the virtual name is never held or installed, and
a dry run after it plans nothing.

What stands in: the bus holds the record's NVSwitch bridges but not its GPUs (sandbox hosts
are gpu_less and load no driver: pci_record.mounted_functions says why), and the packages are
the stand-ins' (gpufleet/sandbox/standins, from the record), so Fabric Manager's service runs
the stand-in daemon.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from gpufleet.sandbox.inventory import group_data
from gpufleet.spec import NodeSpec
from tests.integration.conftest import Sandbox, running_sandbox
from tests.integration.deploy_helpers import pyinfra

pytestmark = pytest.mark.integration

HOST = "gfsb-h1"
RECORD = "hgx-h100"  # 4 NVSwitch bridges (10de:22a3) at 07:00.0 .. 0a:00.0
SWITCHES = ("0000:07:00.0", "0000:08:00.0", "0000:09:00.0", "0000:0a:00.0")
LIMIT = ("--limit", HOST)
VIRTUAL = "nvidia-fabricmanager-580"


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(
        1, standins=True, from_snapshot=provisioned, pci_records={HOST: RECORD}
    ) as running:
        yield running


def test_the_host_sees_the_recorded_nvswitches_on_its_bus(sandbox: Sandbox) -> None:
    listed = sandbox.ssh(
        HOST,
        "for d in /sys/bus/pci/devices/*; do "
        'echo "${d##*/} $(cat $d/vendor) $(cat $d/class) $(cat $d/device)"; done',
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [f"{slot} 0x10de 0x068000 0x22a3" for slot in SWITCHES], (
        listed.stdout
    )
    mounted = sandbox.ssh(
        HOST, "awk '$5 == \"/sys/bus/pci/devices\" {print $6}' /proc/self/mountinfo"
    ).stdout.split()
    assert mounted and mounted[-1].split(",")[0] == "ro", mounted  # the bind, read-only


def test_the_real_fabric_manager_package_is_installed_held_and_the_virtual_name_never(
    sandbox: Sandbox,
) -> None:
    run = pyinfra(*LIMIT, refuse="")
    assert run.returncode == 0 and run.errors() == {}, run.log[-6000:]
    planned = re.search(rf"\[{HOST}\]\s+gpufleet plan: (.*)$", run.log, re.M)
    assert planned, run.log[-4000:]
    assert "no GPU, 4 NVSwitch" in planned[1] and "nvidia-fabricmanager" in planned[1], planned[1]
    assert VIRTUAL not in planned[1], planned[1]
    resolution = NodeSpec.from_host_data(group_data(sandbox.state)).resolve(
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
    assert VIRTUAL not in held | set(installed)
    asked = sandbox.ssh(HOST, "grep -h '^Commandline:' /var/log/apt/history.log || true").stdout
    assert VIRTUAL not in asked, asked
    active = sandbox.ssh(HOST, "systemctl is-active nvidia-fabricmanager").stdout.strip()
    assert active == "active", active
    again = pyinfra("--dry", *LIMIT, refuse="")
    changing = {op["name"]: op["hosts_with_change"] for op in again.report["plan"]}
    assert not {name for name, hosts in changing.items() if hosts}, json.dumps(changing)[-3000:]
