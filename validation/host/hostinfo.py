"""What the checks need to know about a host, read through testinfra, plus pure parsers of it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

NVIDIA_VENDOR = "0x10de"
# PCI class codes (sysfs `class`, 0xCCSSPP): 0x0300 VGA and 0x0302 3D controllers are GPUs;
# NVSwitch shows up as 0x0680 ("Bridge: other") with NVIDIA's vendor id.
GPU_CLASSES = ("0x0300", "0x0302")
NVSWITCH_CLASS = "0x0680"

GPU_LESS_DRIVER_REASON = "no NVIDIA kernel module loaded (GPU-less host)"
GPU_SKIP_PREFIX = "needs an NVIDIA GPU/driver: "

# One line per PCI device: "<slot> <vendor> <device> <class>", read from sysfs so that no
# pciutils is needed (sandbox images and minimal servers lack lspci).
PCI_SCRIPT = (
    'for d in /sys/bus/pci/devices/*; do [ -r "$d/vendor" ] && '
    'echo "${d##*/} $(cat "$d/vendor") $(cat "$d/device") $(cat "$d/class")"; done; true'
)


@dataclass(frozen=True)
class PciDevice:
    """One PCI function from sysfs.

    Example: ``PciDevice("0000:17:00.0", "0x10de", "2330", "0x030200").is_nvidia_gpu``
    """

    slot: str
    vendor: str
    device_id: str
    pci_class: str

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == NVIDIA_VENDOR and self.pci_class.startswith(GPU_CLASSES)

    @property
    def is_nvswitch(self) -> bool:
        return self.vendor == NVIDIA_VENDOR and self.pci_class.startswith(NVSWITCH_CLASS)


def parse_sysfs_pci(text: str) -> list[PciDevice]:
    """Parse :data:`PCI_SCRIPT` output; device ids lose their ``0x`` to match the matrix keys."""
    devices = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        slot, vendor, device, pci_class = parts
        device_id = device.lower().removeprefix("0x")
        devices.append(PciDevice(slot, vendor.lower(), device_id, pci_class.lower()))
    return devices


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as a dict. Example: ``{"ID": "ubuntu", "VERSION_ID": "22.04"}``"""
    values = {}
    for line in text.splitlines():
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value.strip("\"'")]
        values[key.strip()] = parts[0] if parts else ""
    return values


def parse_showhold(text: str) -> set[str]:
    """``apt-mark showhold`` -> package names (an ``:amd64`` arch suffix removed)."""
    return {line.strip().split(":", 1)[0] for line in text.splitlines() if line.strip()}


def split_apt_spec(spec: str) -> tuple[str, str | None]:
    """``"libnccl2=2.27.7-1+cuda12.9"`` -> ``("libnccl2", "2.27.7-1+cuda12.9")``."""
    name, sep, version = spec.partition("=")
    return name, (version if sep else None)


def parse_apt_blacklist(apt_config_dump: str) -> list[str]:
    """The ``Unattended-Upgrade::Package-Blacklist`` entries from ``apt-config dump``."""
    entries = []
    pattern = re.compile(r'^Unattended-Upgrade::Package-Blacklist::\s+"(.*)";\s*$')
    for line in apt_config_dump.splitlines():
        match = pattern.match(line.strip())
        if match and match.group(1):
            entries.append(match.group(1))
    return entries


def blacklist_covers(entries: Iterable[str], prefix: str) -> bool:
    """Whether an unattended-upgrades blacklist entry (a regex since u-u 1.x) covers ``prefix``.

    Example: ``blacklist_covers(["^nvidia-.*"], "nvidia-") is True``
    """
    probe = prefix + "x-probe"
    for entry in entries:
        try:
            if re.match(entry, probe):
                return True
        except re.error:
            pass
        if entry.lstrip("^").startswith(prefix):
            return True
    return False


def kernel_sort_key(version: str) -> tuple:
    """Order kernel release strings (``6.8.0-45-generic``) the way dpkg roughly would."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-+~]", version))


@dataclass
class HostInfo:
    """Facts every check shares, read once per host."""

    os_release: dict[str, str]
    machine: str
    kernel: str
    installed_kernels: list[str]
    pci: list[PciDevice]
    nvidia_module_loaded: bool
    driver_version_text: str | None
    nvidia_smi_path: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gpus_on_bus(self) -> list[PciDevice]:
        return [d for d in self.pci if d.is_nvidia_gpu]

    @property
    def nvswitches_on_bus(self) -> list[PciDevice]:
        return [d for d in self.pci if d.is_nvswitch]

    @property
    def newest_kernel(self) -> str:
        return max([*self.installed_kernels, self.kernel], key=kernel_sort_key)

    def gpu_missing_reason(self) -> str | None:
        """Why GPU checks cannot run here (None when they can): the skip reason's detail."""
        if not self.gpus_on_bus:
            return "no NVIDIA GPU on the PCI bus"
        return None


def gather(host: Any) -> HostInfo:
    """Read the shared facts from a testinfra ``host``; raises RuntimeError if unreachable."""
    os_text = host.run("cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release").stdout
    kernels = host.run("ls -1 /lib/modules 2>/dev/null; true").stdout.split()
    version_file = host.run("cat /proc/driver/nvidia/version 2>/dev/null")
    return HostInfo(
        os_release=parse_os_release(os_text),
        machine=host.run("uname -m").stdout.strip(),
        kernel=host.run("uname -r").stdout.strip(),
        installed_kernels=[k for k in kernels if k and k[0].isdigit()],
        pci=parse_sysfs_pci(host.run(PCI_SCRIPT).stdout),
        nvidia_module_loaded=host.run("test -d /sys/module/nvidia").rc == 0,
        driver_version_text=version_file.stdout if version_file.rc == 0 else None,
        nvidia_smi_path=host.run("command -v nvidia-smi").stdout.strip() or None,
    )
