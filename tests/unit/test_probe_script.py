"""The host probe's own script, run by this machine's sh over a made-up sysfs and dpkg folder
(the real paths, each a folder of this test's, mounted in a mount namespace of its own): NVIDIA
PCI functions, the SecureBoot variable and dpkg's update records are read as the parser
expects. Needs root and unshare(1), as CI has."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.stages.host_probe import HostProbe

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("unshare") is None
    or not Path("/var/lib/dpkg/updates").is_dir(),
    reason="mounts a made-up sysfs in a mount namespace: needs root, unshare(1) and dpkg",
)

# SecureBoot-<EFI global variable GUID> (UEFI spec 2.10, 3.3 "Globally Defined Variables"):
# 4 bytes of attributes, then the value.
SECURE_BOOT = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def pci_function(root: Path, slot: str, vendor: str, pci_class: str, device: str) -> None:
    folder = root / slot
    folder.mkdir()
    for name, value in (("vendor", vendor), ("class", pci_class), ("device", device)):
        (folder / name).write_text(value + "\n")  # sysfs ends each attribute with a newline


def probe_in(
    tmp_path: Path, *, secure_boot: int | None, updates: int, leftovers: tuple[str, ...] = ()
) -> list[str]:
    pci = tmp_path / "pci"
    pci.mkdir(parents=True)
    pci_function(pci, "0000:00:1f.0", "0x8086", "0x060100", "0x1c44")  # an Intel bridge
    pci_function(pci, "0000:3b:00.0", "0x10de", "0x030200", "0x2330")  # H100 SXM5 80GB
    pci_function(pci, "0000:3c:00.0", "0x10de", "0x068000", "0x22a3")  # an NVSwitch
    (pci / "0000:5e:00.0").mkdir()  # a function whose attributes cannot be read
    firmware = tmp_path / "firmware"
    efivars = firmware / "efi" / "efivars"
    efivars.mkdir(parents=True)
    if secure_boot is not None:
        (efivars / SECURE_BOOT).write_bytes(bytes([6, 0, 0, 0, secure_boot]))
    dpkg_updates = tmp_path / "updates"
    dpkg_updates.mkdir()
    for index in range(updates):
        (dpkg_updates / f"{index:04d}").write_text("Package: x\n")
    for name in leftovers:
        (dpkg_updates / name).write_text("Package: x\n")
    command = HostProbe().command(env_dir=str(tmp_path / "env"), disk_paths=("/", "/nowhere/x"))
    mounts = (
        f"mount --bind {pci} /sys/bus/pci/devices && "
        f"mount -t tmpfs none /sys/firmware && mkdir -p /sys/firmware/efi && "
        f"mount --bind {firmware / 'efi'} /sys/firmware/efi && "
        f"mount --bind {dpkg_updates} /var/lib/dpkg/updates && "
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mounts + "exec sh -c \"$0\"",
         command.get_raw_value()],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_nvidia_functions_secure_boot_and_update_records_are_read(tmp_path: Path) -> None:
    state = HostProbe().process(probe_in(tmp_path, secure_boot=1, updates=5))
    assert [(d.slot, d.pci_class, d.device_id) for d in state.pci] == [
        ("0000:3b:00.0", "0302", "2330"),
        ("0000:3c:00.0", "0680", "22a3"),
    ]
    assert [d.slot for d in state.gpus] == ["0000:3b:00.0"] and state.has_nvswitch
    assert state.secure_boot is True
    assert state.dpkg_problems[:3] == tuple(f"pending update record {i:04d}" for i in range(3))
    assert not any("0003" in line for line in state.dpkg_problems)  # three at most
    assert set(state.free_disk) == {"/", "/nowhere/x"}  # the nearest existing parent's disk
    assert state.free_disk["/nowhere/x"] == state.free_disk["/"]


def test_dpkgs_leftover_tmp_file_is_no_update_record(tmp_path: Path) -> None:
    """apt counts names of digits alone (debSystem::CheckUpdates): dpkg's own ``tmp.i`` left
    behind is not an interrupted run, so it must not plan a repair at every deploy."""
    state = HostProbe().process(
        probe_in(tmp_path, secure_boot=None, updates=0, leftovers=("tmp.i", ".hidden"))
    )
    assert not [line for line in state.dpkg_problems if line.startswith("pending update")]


def test_secure_boot_off_absent_and_no_update_records(tmp_path: Path) -> None:
    off = HostProbe().process(probe_in(tmp_path / "off", secure_boot=0, updates=0))
    assert off.secure_boot is False
    assert not any(line.startswith("pending update record") for line in off.dpkg_problems)
    absent = HostProbe().process(probe_in(tmp_path / "absent", secure_boot=None, updates=0))
    assert absent.secure_boot is None
