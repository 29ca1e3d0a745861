"""The deploy's plan for the fabric manager e2e's host, on @fake: a sandbox host (the sandbox
inventory's own data, gpu_less) whose PCI bus is the NVSwitch bridges of the recorded HGX H100
listing, with fabric_manager left at auto. What the sandbox run then installs is checked there
(tests/integration/test_fabric_manager_e2e.py); this shows it is planned, before any fleet."""

from __future__ import annotations

from pathlib import Path

from gpufleet.sandbox import pci_record
from gpufleet.sandbox.inventory import group_data
from gpufleet.sandbox.state import SandboxState
from tests import pyinfra_cli
from tests.unit.fake_fleet import FakeGpuHost, write_inventory

STATE = SandboxState(
    image="ubuntu22.04",
    os=["ubuntu", "22.04"],
    nvidia_repo_url="http://10.231.7.1:8631/nvidia/ubuntu2204/x86_64/",
    nvidia_repo_key_url="http://10.231.7.1:8631/nvidia/key.asc",
    nvidia_repo_key_fingerprint="0" * 40,
    pip_index_url="http://10.231.7.1:8631/simple",
)


def test_the_recorded_nvswitches_alone_get_a_gpu_less_host_fabric_manager(
    tmp_path: Path,
) -> None:
    switches = pci_record.mounted_functions(pci_record.load_record("hgx-h100"))
    host = FakeGpuHost(
        gpus=(),
        nvswitches=tuple(str(d.device_id) for d in switches),
        inventory=group_data(STATE),
    )
    assert host.spec().gpu_less and host.spec().fabric_manager == "auto"
    result, plan = pyinfra_cli.plan(write_inventory(tmp_path / "inventory.py", {"nvsw": host}))
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(
        (row for row in result.stderr.splitlines() if "gpufleet plan:" in row),
        result.stderr[-4000:],
    )
    assert "no GPU, 4 NVSwitch" in line, line
    assert "nvidia-fabricmanager, libnvidia-nscq;" in line, line
    ops = [
        op["name"] for op in plan if op["hosts_with_change"] + op["hosts_with_conditional_change"]
    ]
    assert "gpufleet driver | nvidia-fabricmanager running (NVSwitch)" in ops, ops
    assert "gpufleet driver | nvidia-fabricmanager held" in ops, ops
    assert not any("nvidia-fabricmanager-580" in op for op in ops), ops
