"""The host probe's parsing, and the preflight decisions made from it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import (
    HostProbe,
    HostState,
    PciDevice,
    branch_of_package_version,
    parse_probe,
)
from gpufleet.stages.node import NodePlan
from gpufleet.stages.preflight import describe, driver_will_change, foreign_driver, refusals

RECORDED = Path(__file__).parents[1] / "operations" / "facts" / "host_probe.HostProbe"
S = "##gpufleet-probe:"


def test_recorded_output_of_a_machine_without_gpu():
    fixture = json.loads((RECORDED / "debian12_no_gpu.json").read_text())
    state = parse_probe(fixture["output"])
    assert (state.os_id, state.os_version, state.arch) == ("debian", "12", "x86_64")
    assert state.pci == ()
    assert state.secure_boot is None  # no EFI variables in that VM
    assert state.free_disk_kib and state.free_disk_kib > 0


def test_gpu_server_sections():
    # Constructed, not recorded: each section holds what its command prints in the formats
    # documented for sysfs PCI attributes (0x-prefixed hex), the SecureBoot EFI variable
    # (od: 4 attribute bytes then 1) and dpkg-query's ${db:Status-Abbrev} ("ii ", "hi ").
    lines = [
        f"{S}os",
        "ID=ubuntu",
        'VERSION_ID="22.04"',
        f"{S}arch",
        "x86_64",
        f"{S}kernel",
        "5.15.0-91-generic",
        f"{S}pci",
        "0000:18:00.0 0x030200 0x2330",
        "0000:2a:00.0 0x030200 0x2330",
        "0000:05:00.0 0x068000 0x22a3",
        f"{S}secure_boot",
        "1",
        f"{S}loaded",
        "570.195.03",
        f"{S}installed_module",
        "570.195.03",
        f"{S}nouveau",
        f"{S}runfile",
        f"{S}packages",
        "hi  cuda-drivers-570 570.195.03-1",
        "rc  nvidia-driver-535 535.183.01-0ubuntu1",
        f"{S}held",  # packages whose dpkg selection is hold: one name a line
        "libnccl2",
        "cuda-drivers-570",
        f"{S}marker",
        "570",
        f"{S}gpu_processes",
        "4242, python3",
        f"{S}disk",
        "/dev/nvme0n1p2 976762584 2000 900000000 1% /",
        f"{S}env",
    ]
    state = parse_probe(lines)
    assert [d.device_id for d in state.gpus] == ["2330", "2330"]
    assert state.has_nvswitch
    assert state.secure_boot is True
    assert state.packages == {"cuda-drivers-570": "570.195.03-1"}  # rc = removed, not installed
    assert state.installed_branches == {570}
    assert state.held == ("cuda-drivers-570", "libnccl2")
    assert state.marker_branch == 570
    assert state.gpu_processes == ("4242, python3",)
    assert state.free_disk_kib == 900000000
    assert not state.env_present


def _plan(**state_fields) -> NodePlan:
    spec = NodeSpec.from_host_data(state_fields.pop("inventory", {}))
    state = HostState(
        os_id="ubuntu",
        os_version="22.04",
        os_pretty="Ubuntu 22.04.4 LTS",
        arch="x86_64",
        kernel="5.15.0-91-generic",
        pci=(PciDevice("0000:18:00.0", "0302", "20b2"),),
        secure_boot=False,
        free_disk_kib=10**9,
        **state_fields,
    )
    resolution = spec.resolve(
        os_id=state.os_id,
        os_version=state.os_version,
        arch=state.arch,
        gpu_device_ids=state.device_ids,
    )
    return NodePlan(spec=spec, state=state, resolution=resolution)


def test_clean_host_passes_and_is_described():
    plan = _plan()
    assert refusals(plan) == []
    assert "1x NVIDIA A100-SXM4-80GB -> repository ubuntu2204/x86_64; driver 580" in describe(plan)


@pytest.mark.parametrize(
    ("fields", "found"),
    [
        ({"runfile_uninstaller": "/usr/bin/nvidia-uninstall"}, "a runfile install"),
        (
            {"packages": {"nvidia-driver-550": "550.120-0ubuntu0.22.04.1"}},
            "built by the distribution",
        ),
        ({"packages": {"nvidia-driver": "535.216.01-1~deb12u1"}}, "built by the distribution"),
        (
            {"packages": {"cuda-drivers-570": "570.195.03-1"}},
            "branch 570 not installed by gpufleet",
        ),
        ({"loaded_driver": "550.54.14"}, "no package provides it"),
    ],
)
def test_foreign_drivers(fields, found):
    plan = _plan(**fields)
    assert found in (foreign_driver(plan) or "")
    assert any("replace_foreign_driver: True" in r for r in refusals(plan))
    allowed = _plan(inventory={"replace_foreign_driver": True}, **fields)
    assert refusals(allowed) == []
    assert driver_will_change(allowed)


def test_own_driver_of_the_same_branch_is_not_foreign():
    # NVIDIA's repository builds for Ubuntu end in -0ubuntu1; Ubuntu's own in -0ubuntu0.<release>.
    plan = _plan(packages={"nvidia-open": "580.105.08-0ubuntu1"}, marker_branch=580)
    assert foreign_driver(plan) is None
    adopted = _plan(packages={"nvidia-open": "580.105.08-0ubuntu1"})  # same branch, no marker
    assert foreign_driver(adopted) is None


def test_gpu_processes_block_only_a_driver_change():
    busy = {"gpu_processes": ("77, trainer",), "loaded_driver": "580.105.08"}
    same = _plan(packages={"nvidia-open": "580.105.08-1"}, marker_branch=580, **busy)
    assert refusals(same) == []
    change = _plan(packages={"cuda-drivers-570": "570.195.03-1"}, marker_branch=570, **busy)
    assert "while 1 GPU process(es) run (77, trainer)" in " ".join(refusals(change))
    forced = _plan(
        packages={"cuda-drivers-570": "570.195.03-1"},
        marker_branch=570,
        inventory={"force_driver_change": True},
        **busy,
    )
    assert refusals(forced) == []


def test_secure_boot_plans():
    assert "secure_boot_plan is 'none'" in refusals(_sb())[0]
    assert (
        refusals(_sb(inventory={"secure_boot_plan": "ubuntu-signed"}, shim_mok_present=True)) == []
    )
    missing = refusals(_sb(inventory={"secure_boot_plan": "ubuntu-signed"}))
    assert "MOK.der is missing" in missing[0]


def _sb(**fields) -> NodePlan:
    plan = _plan(**fields)
    return NodePlan(
        spec=plan.spec,
        state=HostState(**{**plan.state.__dict__, "secure_boot": True}),
        resolution=plan.resolution,
    )


@pytest.mark.parametrize(
    ("version", "branch"),
    [
        ("1:570.195.03-0ubuntu1", 570),
        ("580.95.05-1", 580),
        ("580-1ubuntu1", 580),  # nvidia-driver-pinning-580: versioned by the branch alone
        ("610-2ubuntu1", 610),
        ("20151021+13", None),  # Debian's nvidia-kernel-common: not a driver version
        ("1.0-1", None),
    ],
)
def test_branch_of_package_version(version, branch):
    assert branch_of_package_version(version) == branch


DPKG_STATUS = """\
Package: libnccl2
Status: hold ok installed
Architecture: amd64
Version: 2.27.7-1+cuda12.9

Package: libcudnn9-cuda-12
Status: install ok installed
Architecture: amd64
Version: 9.10.2.21-1

Package: datacenter-gpu-manager-4-core
Status: hold ok installed
Architecture: amd64
Version: 1:4.4.1-1

"""


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (Debian/Ubuntu)")
def test_held_section_lists_what_dpkg_selections_hold(tmp_path: Path) -> None:
    """The probe's ``held`` command run by the real dpkg-query on a status file: packages whose
    selection is ``hold`` (what ``apt-mark hold`` sets), and only those. It replaced
    ``apt-mark showhold``, which loads apt's whole cache (43 ms of a sandbox host's CPU per run
    against 7 ms)."""
    (tmp_path / "status").write_text(DPKG_STATUS)
    (tmp_path / "updates").mkdir()
    # The script exactly as HostProbe sends it: sh -c SCRIPT gpufleet-probe ENV PATH...
    _sh, _c, script, *_ = shlex.split(HostProbe().command(env_dir="/nonexistent").get_raw_value())
    lines = script.splitlines()
    held = lines[lines.index(f"echo '{S}held'") + 1]
    command = held.replace("dpkg-query", f"dpkg-query --admindir={tmp_path}", 1)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    state = parse_probe([f"{S}held", *done.stdout.splitlines()])
    assert state.held == ("datacenter-gpu-manager-4-core", "libnccl2")
