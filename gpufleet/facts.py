"""pyinfra facts about NVIDIA hardware, driver and CUDA on a host, built on gpufleet.parsers."""

# Every fact is one cheap command (one SSH round trip: the sandbox benchmark counts them),
# exits 0 on any host, and gives its default (None, False or an empty list) on a host
# without a GPU, a driver or the tool, so that preflight can run on anything.

from __future__ import annotations

import re
from typing import Any

from pyinfra.api import FactBase, StringCommand
from pyinfra.api.command import QuoteString
from pyinfra.api.exceptions import FactProcessError
from typing_extensions import override

from gpufleet.parsers.nvidia_smi import NvidiaSmiParseError, parse_nvidia_smi_csv
from gpufleet.parsers.pci import PciDevice, parse_lspci, parse_sysfs_pci
from gpufleet.parsers.system import (
    DkmsEntry,
    DriverVersion,
    GpuProcess,
    NvccVersion,
    parse_df_avail,
    parse_dkms_status,
    parse_driver_version,
    parse_gpu_processes,
    parse_lsmod_has,
    parse_mokutil_sb_state,
    parse_nvcc_version,
)

# modinfo and dkms live in /usr/sbin or /sbin, which a non-root login on Debian lacks.
_SBIN_PATH = "PATH=$PATH:/usr/sbin:/sbin;"
# Marker printed when nvidia-smi exists but fails (driver not loaded, library mismatch).
NVIDIA_SMI_FAILED = "##gpufleet:nvidia-smi-failed"
# The EFI global variable (EFI_GLOBAL_VARIABLE GUID) holding the firmware's Secure Boot switch.
_SECURE_BOOT_EFIVAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
_EFIVAR_LINE_RE = re.compile(r"^efivar SecureBoot\s+(?P<value>\d+)\s*$")
_QUERY_FIELD_RE = re.compile(r"^[a-z][a-z0-9_.]*$")


class NvidiaPciDevices(FactBase[list[PciDevice]]):
    """
    NVIDIA PCI functions on the bus (GPUs, NVSwitch bridges, audio functions), whether or not
    a driver is installed. Reads ``lspci -Dnn``; without pciutils, the vendor, device and
    class files under ``/sys/bus/pci/devices``. Filter with ``PciDevice.is_gpu``.

    .. code:: python

        [
            PciDevice(slot="0000:1b:00.0", device_class="3D controller", vendor_id="10de",
                      device_id="2335", name="GH100 [H200 SXM 141GB]"),
        ]
    """

    @override
    def command(self) -> str:
        return (
            "if command -v lspci >/dev/null 2>&1; then lspci -Dnn -d 10de: 2>/dev/null; "
            "else for d in /sys/bus/pci/devices/*; do "
            '[ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && '
            'echo "${d##*/} $(cat "$d/vendor") $(cat "$d/device") $(cat "$d/class")"; '
            "done; fi; true"
        )

    @override
    @staticmethod
    def default() -> list[PciDevice]:
        return []

    @override
    def process(self, output: list[str]) -> list[PciDevice]:
        text = "\n".join(output)
        return parse_lspci(text) + parse_sysfs_pci(text)


class SecureBootState(FactBase[bool | None]):
    """
    Whether UEFI Secure Boot is on: True, False, or None (legacy BIOS boot, no EFI variables,
    unknown). Uses ``mokutil --sb-state``; without mokutil, reads the SecureBoot EFI variable.

    .. code:: python

        True
    """

    @override
    def command(self) -> str:
        return (
            "if command -v mokutil >/dev/null 2>&1; then mokutil --sb-state 2>&1; "
            f"elif [ -r {_SECURE_BOOT_EFIVAR} ]; then "
            # Four attribute bytes come first; the fifth byte is the value.
            f'echo "efivar SecureBoot $(od -An -tu1 -j4 -N1 {_SECURE_BOOT_EFIVAR})"; '
            "fi; true"
        )

    @override
    def process(self, output: list[str]) -> bool | None:
        for line in output:
            match = _EFIVAR_LINE_RE.match(line.strip())
            if match:
                return match["value"] == "1"
        return parse_mokutil_sb_state("\n".join(output))


class LoadedNvidiaDriver(FactBase[DriverVersion | None]):
    """
    The NVIDIA kernel module that is loaded now (``/proc/driver/nvidia/version``), or None.

    .. code:: python

        DriverVersion(version="565.57.01", flavor="open")
    """

    @override
    def command(self) -> str:
        return "cat /proc/driver/nvidia/version 2>/dev/null; true"

    @override
    def process(self, output: list[str]) -> DriverVersion | None:
        return parse_driver_version("\n".join(output))


class InstalledNvidiaDriver(FactBase[DriverVersion | None]):
    """
    The NVIDIA kernel module installed for the running kernel (``modinfo nvidia``), or None.
    Differs from ``LoadedNvidiaDriver`` after an upgrade until the host reboots.

    .. code:: python

        DriverVersion(version="550.90.07", flavor="proprietary")
    """

    @override
    def command(self) -> str:
        fields = "'^(filename|version|license):'"
        return f"{_SBIN_PATH} modinfo nvidia 2>/dev/null | grep -E {fields}; true"

    @override
    def process(self, output: list[str]) -> DriverVersion | None:
        return parse_driver_version("\n".join(output))


class NvidiaSmiQuery(FactBase[list[dict[str, Any]] | None]):
    """
    ``nvidia-smi --query-gpu=<fields>``: one dict per GPU keyed by the requested fields,
    units stripped and placeholders such as ``[N/A]`` as None. None when nvidia-smi is
    missing or fails (no driver loaded, driver/library mismatch).

    .. code:: python

        host.get_fact(NvidiaSmiQuery, fields=["name", "driver_version", "memory.total"])
        [{"name": "NVIDIA H100 80GB HBM3", "driver_version": "550.90.07", "memory.total": "81559"}]
    """

    _fields: tuple[str, ...] = ()

    @override
    def command(self, fields: list[str] | str) -> StringCommand:
        # The CLI (`pyinfra INV fact ... fields=name,uuid`) passes one comma-separated string.
        names = fields.split(",") if isinstance(fields, str) else list(fields)
        names = [name.strip() for name in names if name.strip()]
        if not names:
            raise ValueError(
                "NvidiaSmiQuery needs nvidia-smi --query-gpu field names, "
                f'got {fields!r}; e.g. fields=["name", "driver_version"] '
                "(see nvidia-smi --help-query-gpu)"
            )
        bad = [name for name in names if not _QUERY_FIELD_RE.match(name)]
        if bad:
            raise ValueError(
                f"not nvidia-smi --query-gpu field names: {bad!r}; names are lower-case words "
                'joined by "." or "_", e.g. "memory.total" (see nvidia-smi --help-query-gpu)'
            )
        self._fields = tuple(names)
        return StringCommand(
            "command -v nvidia-smi >/dev/null 2>&1 && { nvidia-smi",
            QuoteString(f"--query-gpu={','.join(names)}"),
            f"--format=csv,noheader,nounits 2>&1 || echo '{NVIDIA_SMI_FAILED}'; }}; true",
        )

    @override
    def process(self, output: list[str]) -> list[dict[str, Any]] | None:
        # No output: nvidia-smi is not installed (pyinfra then gives the default, None, too).
        if not any(line.strip() for line in output):
            return None
        if any(line.strip() == NVIDIA_SMI_FAILED for line in output):
            return None
        try:
            return list(parse_nvidia_smi_csv("\n".join(output), fields=list(self._fields)))
        except NvidiaSmiParseError as error:
            # pyinfra reports a FactProcessError against the host instead of crashing the run.
            raise FactProcessError(f"nvidia-smi --query-gpu output: {error}") from error


class GpuProcesses(FactBase[list[GpuProcess]]):
    """
    Compute processes running on the GPUs (``nvidia-smi --query-compute-apps``); an empty
    list when there are none or nvidia-smi is missing or fails.

    .. code:: python

        [GpuProcess(pid=44378, process_name="tritonserver", used_memory_mib=1836)]
    """

    @override
    def command(self) -> str:
        return (
            "command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi "
            "--query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits "
            "2>/dev/null; true"
        )

    @override
    @staticmethod
    def default() -> list[GpuProcess]:
        return []

    @override
    def process(self, output: list[str]) -> list[GpuProcess]:
        return parse_gpu_processes("\n".join(output))


class DkmsStatus(FactBase[list[DkmsEntry]]):
    """
    ``dkms status`` entries, dkms 2.x or 3.x; an empty list without dkms.

    .. code:: python

        [DkmsEntry(module="nvidia", version="550.54.15", kernel="6.5.0-26-generic",
                   arch="x86_64", status="installed", note=None)]
    """

    @override
    def command(self) -> str:
        return f"{_SBIN_PATH} command -v dkms >/dev/null 2>&1 && dkms status 2>/dev/null; true"

    @override
    @staticmethod
    def default() -> list[DkmsEntry]:
        return []

    @override
    def process(self, output: list[str]) -> list[DkmsEntry]:
        return parse_dkms_status("\n".join(output))


class CudaToolkitVersion(FactBase[NvccVersion | None]):
    """
    The system CUDA toolkit's version from ``nvcc --version`` (``/usr/local/cuda/bin`` first,
    then ``PATH``), or None when no toolkit is installed.

    .. code:: python

        NvccVersion(release="12.5", version="12.5.82")
    """

    @override
    def command(self) -> str:
        return (
            "if [ -x /usr/local/cuda/bin/nvcc ]; then /usr/local/cuda/bin/nvcc --version; "
            "elif command -v nvcc >/dev/null 2>&1; then nvcc --version; fi 2>/dev/null; true"
        )

    @override
    def process(self, output: list[str]) -> NvccVersion | None:
        return parse_nvcc_version("\n".join(output))


class NouveauLoaded(FactBase[bool]):
    """
    Whether the nouveau kernel module is loaded (``/proc/modules``); it keeps the NVIDIA
    driver from binding to the GPU until the host reboots with nouveau blacklisted.

    .. code:: python

        False
    """

    @override
    def command(self) -> str:
        return "grep -E '^nouveau ' /proc/modules 2>/dev/null; true"

    @override
    @staticmethod
    def default() -> bool:
        return False

    @override
    def process(self, output: list[str]) -> bool:
        return parse_lsmod_has("\n".join(output), "nouveau")


class FreeDiskBytes(FactBase[int | None]):
    """
    Free bytes on the file system that holds ``path`` (or its nearest existing parent, so
    that a directory still to be created can be checked); None where ``df`` cannot say.

    .. code:: python

        host.get_fact(FreeDiskBytes, path="/opt/conda")
        83405512704
    """

    @override
    def command(self, path: str = "/") -> StringCommand:
        if not path.startswith("/"):
            raise ValueError(f"FreeDiskBytes needs an absolute path, got {path!r}; e.g. '/opt'")
        return StringCommand(
            StringCommand("p=", QuoteString(path), _separator=""),
            '; while [ ! -e "$p" ]; do p=$(dirname "$p"); done;',
            'df -B1 --output=avail "$p" 2>/dev/null; true',
        )

    @override
    def process(self, output: list[str]) -> int | None:
        return parse_df_avail("\n".join(output))
