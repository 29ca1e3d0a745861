"""Recorded lspci listings (records/pci/) as the sysfs PCI tree a sandbox host boots with."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpufleet.parsers.pci import PciDevice, parse_lspci
from gpufleet.sandbox.state import SandboxError

RECORDS_DIR = Path(__file__).resolve().parent / "records" / "pci"
# Where a host's tree is kept: beside its root (hosts.host_dir(name) / TREE_DIR), so that a
# stopped host started again boots with it, and a fresh `up` (which removes the host's folder)
# without --pci-record boots without it.
TREE_DIR = "pci-devices"
MOUNT_POINT = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"

# lspci's class names as the kernel prints the function's class file: base class, subclass
# (hgx-h100-rhel.txt, `lspci -nn`, prints both: "Bridge [0680]", "3D controller [0302]"),
# programming interface (00 assumed: lspci shows it only with -v; records/pci/SOURCES.md).
SYSFS_CLASS = {
    "VGA compatible controller": "0x030000",
    "3D controller": "0x030200",
    "Bridge": "0x068000",
}


def record_names() -> list[str]:
    """The recorded listings, by name: ``["hgx-a100", "hgx-h100"]``."""
    return sorted(path.stem for path in RECORDS_DIR.glob("*.txt"))


def load_record(name: str) -> list[PciDevice]:
    """The NVIDIA functions of recorded listing ``name``, as lspci printed them."""
    path = RECORDS_DIR / f"{name}.txt"
    if name not in record_names():
        raise SandboxError(
            f"no recorded PCI listing {name!r} (in {RECORDS_DIR}; recorded: "
            f"{', '.join(record_names())}). Fix: pick one of those, or record a real "
            "listing there with its source in SOURCES.md."
        )
    devices = parse_lspci(path.read_text())
    if not devices:
        raise SandboxError(f"{path} lists no NVIDIA PCI function: it is not an lspci listing")
    return devices


def mounted_functions(devices: Sequence[PciDevice]) -> list[PciDevice]:
    """The functions a sandbox host's bus shows: the NVSwitch bridges only.

    Sandbox hosts are ``gpu_less`` (no GPU, no NVIDIA kernel module, CPU-only TensorFlow).
    The NVSwitch bridges are what the deploy reads to want Fabric Manager (HostProbe's
    ``has_nvswitch``, with ``fabric_manager: auto``). The record's GPUs are left off: the
    resolver ignores a ``gpu_less`` host's device ids anyway, and on the bus they would turn
    the host's GPU checks from "skipped, GPU-less" into failures (validation/host/healthcheck
    ``check_driver_loaded`` fails with GPUs on the bus and no /proc/driver/nvidia; the
    periodic checks run nvidia-smi once a GPU is on the bus), since no driver can load here.
    """
    return [device for device in devices if device.is_nvswitch]


def slot_name(slot: str) -> str:
    """The sysfs name of a slot: lspci without -D leaves the domain out (``07:00.0``); a
    single-segment host's is ``0000``."""
    return slot if slot.count(":") == 2 else f"0000:{slot}"


def build_tree(devices: Sequence[PciDevice], dest: Path) -> Path:
    """Write ``dest`` afresh: one folder per function holding ``vendor``, ``device`` and
    ``class`` as the kernel prints them (``0x10de``, ``0x22a3``, ``0x068000``, each with its
    newline), which is what the host probe's shell loop reads."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for device in devices:
        pci_class = SYSFS_CLASS.get(device.device_class)
        if pci_class is None or device.device_id is None:
            raise SandboxError(
                f"PCI function {device.slot} ({device.device_class}: {device.name}) has no "
                f"known class code or device id (known classes: {', '.join(SYSFS_CLASS)}). "
                "Fix: add its class to pci_record.SYSFS_CLASS, from pci.ids."
            )
        folder = dest / slot_name(device.slot)
        folder.mkdir()
        (folder / "vendor").write_text(f"{NVIDIA_VENDOR}\n")
        (folder / "device").write_text(f"0x{device.device_id}\n")
        (folder / "class").write_text(f"{pci_class}\n")
    return dest


def host_tree(host_dir: Path, record: str) -> Path:
    """Build the tree of ``record``'s mounted functions for the host whose folder is
    ``host_dir``; return it."""
    return build_tree(mounted_functions(load_record(record)), host_dir / TREE_DIR)


def tree_of(root: Path) -> Path | None:
    """The tree a host whose root is ``root`` boots with, or None (no --pci-record)."""
    tree = root.parent / TREE_DIR
    return tree if tree.is_dir() else None


def parse_assignments(values: Sequence[str]) -> dict[str, str]:
    """``["gfsb-h1=hgx-h100"]`` (the ``--pci-record`` values) -> ``{"gfsb-h1": "hgx-h100"}``."""
    assigned: dict[str, str] = {}
    for value in values:
        host, sep, record = value.partition("=")
        if not sep or not host or not record:
            raise SandboxError(
                f"--pci-record {value!r} is not HOST=NAME. Fix: e.g. --pci-record "
                f"gfsb-h1=hgx-h100 (recorded: {', '.join(record_names())})"
            )
        if host in assigned:
            raise SandboxError(f"--pci-record names {host} twice: give each host one listing")
        assigned[host] = record
    return assigned


def check_assignments(assigned: Mapping[str, str], hosts: Sequence[str]) -> None:
    """Refuse, before anything starts, a host the sandbox will not have or an unknown record."""
    unknown = sorted(set(assigned) - set(hosts))
    if unknown:
        raise SandboxError(
            f"--pci-record names {', '.join(unknown)}, which this sandbox will not have "
            f"(hosts: {', '.join(hosts)}). Fix: name one of those, or raise --hosts."
        )
    for record in assigned.values():
        load_record(record)
