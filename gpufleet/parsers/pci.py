"""Parse NVIDIA devices out of ``lspci`` output and sysfs PCI attributes."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

NVIDIA_VENDOR_ID = "10de"

# Device classes that are GPUs; NVSwitches and other NVIDIA functions show up as "Bridge",
# "Audio device" or "USB controller" and must not be counted as GPUs.
GPU_CLASSES = ("VGA compatible controller", "3D controller", "Display controller")

# PCI class codes (base class + subclass) for the sysfs fallback, which has no class names.
_CLASS_NAMES = {
    "0300": "VGA compatible controller",
    "0302": "3D controller",
    "0380": "Display controller",
    "0403": "Audio device",
    "0680": "Bridge",
    "0c03": "USB controller",
    "0c80": "Serial bus controller",
}

# "0000:1b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [...] [10de:2335] (rev a1)".
# Searched rather than anchored so that prefixes from grep, or from scripts that print
# "IOMMU Group 15: <lspci line>", do not hide the device.
_SLOT = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_LINE_RE = re.compile(
    rf"(?:^|\s)(?P<slot>{_SLOT})\s+(?P<cls>[A-Za-z0-9][^:\[]*?)"
    r"(?:\s*\[(?P<class_id>[0-9a-fA-F]{4})\])?:\s+(?P<rest>\S.*)$"
)
# Trailing annotations: "(rev a1)", "(prog-if 00 [VGA controller])", "(driver: nvidia)".
_SUFFIX_RE = re.compile(r"\s*\((?:rev [0-9a-fA-F]+|prog-if [^)]*|driver: [^)]*)\)\s*$")
_IDS_RE = re.compile(r"\s*\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]\s*$")
_VENDOR_RE = re.compile(r"^nvidia corporation\b\s*", re.IGNORECASE)
# Without -nn, lspci names an unknown device "Device 2684": the id is printed all the same.
_UNNAMED_RE = re.compile(r"^Device ([0-9a-fA-F]{4})$")


@dataclass(frozen=True)
class PciDevice:
    """One NVIDIA PCI function as ``lspci`` (or sysfs) shows it."""

    slot: str  # "0000:1b:00.0" with -D, "1b:00.0" without
    device_class: str  # "3D controller", "VGA compatible controller", "Bridge", ...
    vendor_id: str | None  # "10de"; None when the output did not print ids
    device_id: str | None  # "2335"; None when not printed
    name: str  # "GH100 [H200 SXM 141GB]" (vendor name removed)

    @property
    def is_gpu(self) -> bool:
        return self.device_class in GPU_CLASSES

    @property
    def is_nvswitch(self) -> bool:
        # NVSwitch chips enumerate as PCI bridges with NVIDIA's vendor id.
        return self.device_class == "Bridge"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> dict[str, Any]:  # what pyinfra's CLI calls to print a fact
        return self.to_dict()


def _strip_suffixes(rest: str) -> str:
    while True:
        stripped = _SUFFIX_RE.sub("", rest)
        if stripped == rest:
            return rest
        rest = stripped


def _parse_line(line: str) -> PciDevice | None:
    match = _LINE_RE.search(line)
    if not match:
        return None
    rest = _strip_suffixes(match["rest"].strip())
    vendor_id = device_id = None
    ids = _IDS_RE.search(rest)
    if ids:
        vendor_id, device_id = ids["vendor"].lower(), ids["device"].lower()
        rest = rest[: ids.start()].rstrip()
    vendor_name = _VENDOR_RE.match(rest)
    if vendor_id is not None and vendor_id != NVIDIA_VENDOR_ID:
        return None
    if vendor_id is None and not vendor_name:
        return None
    name = rest[vendor_name.end() :] if vendor_name else rest
    if device_id is None:
        unnamed = _UNNAMED_RE.match(name)
        if unnamed:
            device_id = unnamed[1].lower()
    return PciDevice(
        slot=match["slot"].lower(),
        device_class=match["cls"].strip(),
        vendor_id=vendor_id,
        device_id=device_id,
        name=name.strip(),
    )


def parse_lspci(text: str) -> list[PciDevice]:
    """NVIDIA devices in ``lspci`` output (plain, ``-nn``, ``-D``, ``-v``, grep-ed fragments).

    Indented detail lines (``Subsystem:``, ``Kernel driver in use:``) and devices of
    other vendors are ignored.

    >>> parse_lspci("1b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB]"
    ...             " [10de:2335] (rev a1)")[0].device_id
    '2335'
    """
    devices = []
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            continue
        device = _parse_line(line)
        if device is not None:
            devices.append(device)
    return devices


def parse_sysfs_pci(text: str) -> list[PciDevice]:
    """NVIDIA devices from lines of ``<slot> <vendor> <device> <class>`` read out of sysfs.

    Each line holds ``/sys/bus/pci/devices/<slot>`` and the contents of its ``vendor``,
    ``device`` and ``class`` files, e.g. ``0000:1b:00.0 0x10de 0x2335 0x030200``. Used where
    lspci (pciutils) is not installed; sysfs has no device names, so ``name`` is lspci's
    own fallback form, ``Device 2335``.
    """
    devices = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 4 or not re.fullmatch(_SLOT, fields[0]):
            continue
        vendor, device, pci_class = (field.lower().removeprefix("0x") for field in fields[1:])
        if vendor != NVIDIA_VENDOR_ID:
            continue
        class_name = _CLASS_NAMES.get(pci_class[:4], f"Class {pci_class[:4]}")
        devices.append(
            PciDevice(
                slot=fields[0].lower(),
                device_class=class_name,
                vendor_id=vendor,
                device_id=device,
                name=f"Device {device}",
            )
        )
    return devices
