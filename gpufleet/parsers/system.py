"""Parse host-level command output: Secure Boot, NVIDIA kernel module, nvcc, DKMS, modules, disk."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from gpufleet.compat import zip_strict

# NVIDIA driver versions: "565.57.01", "535.183.01", "555.58", "384.98".
_DRIVER_VERSION = r"\d{3}\.\d{1,3}(?:\.\d{1,3})?"


# --- Secure Boot ------------------------------------------------------------------------------


def parse_mokutil_sb_state(text: str) -> bool | None:
    """Secure Boot state from ``mokutil --sb-state``: True, False, or None when unknown.

    None covers "This system doesn't support Secure Boot", "EFI variables are not supported
    on this system" (legacy BIOS boot, containers) and anything unrecognised.

    >>> parse_mokutil_sb_state("SecureBoot disabled\\nPlatform is in Setup Mode")
    False
    """
    for line in text.splitlines():
        words = line.split()
        # Scan every line: the state may follow a shell prompt or warnings in a pasted log.
        for index, word in enumerate(words[:-1]):
            if word == "SecureBoot" and words[index + 1] in ("enabled", "disabled"):
                return words[index + 1] == "enabled"
    return None


# --- NVIDIA kernel module ---------------------------------------------------------------------


@dataclass(frozen=True)
class DriverVersion:
    """An NVIDIA kernel module: its version and flavour ("open" or "proprietary")."""

    version: str  # "565.57.01"
    flavor: str | None  # "open", "proprietary", or None when the text does not say

    @property
    def branch(self) -> int:
        return int(self.version.split(".", 1)[0])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> dict[str, Any]:  # what pyinfra's CLI calls to print a fact
        return self.to_dict()


_NVRM_RE = re.compile(
    r"NVRM version:\s+NVIDIA UNIX\s+(?P<open>Open\s+)?.*?Kernel Module.*?"
    rf"\s(?P<version>{_DRIVER_VERSION})\s"
)
_MODINFO_FIELD_RE = re.compile(r"^\s*(?P<key>[a-z_]+):\s+(?P<value>.*?)\s*$")


def parse_driver_version(text: str) -> DriverVersion | None:
    """The NVIDIA kernel module version from ``/proc/driver/nvidia/version`` or ``modinfo nvidia``.

    ``/proc`` says "Open Kernel Module" for the open flavour; modinfo's ``license:`` is
    "Dual MIT/GPL" for open modules and "NVIDIA" for proprietary ones. Returns None when the
    text holds no NVIDIA module version (module not loaded / not installed).

    >>> parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun")
    DriverVersion(version='535.183.01', flavor='proprietary')
    """
    for line in text.splitlines():
        match = _NVRM_RE.search(line + " ")
        if match:
            return DriverVersion(
                version=match["version"], flavor="open" if match["open"] else "proprietary"
            )

    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _MODINFO_FIELD_RE.match(line)
        # Only the first occurrence counts: modinfo repeats alias/firmware/parm keys.
        if match and match["key"] not in fields:
            fields[match["key"]] = match["value"]
    version = fields.get("version", "")
    if not re.fullmatch(_DRIVER_VERSION, version):
        return None
    license_name = fields.get("license")
    flavor = None
    if license_name == "NVIDIA":
        flavor = "proprietary"
    elif license_name is not None and "MIT" in license_name:
        flavor = "open"
    return DriverVersion(version=version, flavor=flavor)


# --- CUDA toolkit -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NvccVersion:
    """The CUDA toolkit release ("12.5") and full version ("12.5.82") that nvcc reports."""

    release: str
    version: str | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> dict[str, Any]:  # what pyinfra's CLI calls to print a fact
        return self.to_dict()


_NVCC_RE = re.compile(r"release (?P<release>\d+\.\d+)(?:,\s*V(?P<version>\d+(?:\.\d+)+))?")


def parse_nvcc_version(text: str) -> NvccVersion | None:
    """``nvcc --version`` -> release and full version, or None when there is no release line.

    The full version comes from the ``V12.5.82`` token; very old toolkits printed a
    compiler version there that is not the toolkit's ("release 5.0, V0.2.1221"), so a
    token that does not start with the release gives ``version=None``.

    >>> parse_nvcc_version("Cuda compilation tools, release 12.6, V12.6.77")
    NvccVersion(release='12.6', version='12.6.77')
    """
    for line in text.splitlines():
        if "Cuda compilation tools" not in line:
            continue
        match = _NVCC_RE.search(line)
        if match:
            version = match["version"]
            if version is not None and not version.startswith(match["release"] + "."):
                version = None
            return NvccVersion(release=match["release"], version=version)
    return None


# --- DKMS -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DkmsEntry:
    """One line of ``dkms status``."""

    module: str
    version: str
    kernel: str | None  # None when the module is only added, not built for a kernel
    arch: str | None
    status: str  # "added", "built", "installed", ...
    note: str | None = None  # e.g. "WARNING! Diff between built and installed module!"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> dict[str, Any]:  # what pyinfra's CLI calls to print a fact
        return self.to_dict()


_DKMS_RE = re.compile(r"^(?P<head>[^:\s][^:]*):\s+(?P<status>[a-z][a-z-]*)(?:\s+(?P<note>.*))?$")


def parse_dkms_status(text: str) -> list[DkmsEntry]:
    """Entries of ``dkms status``, in dkms 2.x and 3.x formats; error lines are skipped.

    dkms 2.x: ``nvidia, 535.54.03, 5.15.0-76-generic, x86_64: installed``;
    dkms 3.x: ``nvidia/550.54.15, 6.5.0-26-generic, x86_64: installed``;
    added only: ``nvidia/550.54.15: added``.
    """
    entries = []
    for line in text.splitlines():
        match = _DKMS_RE.match(line.strip())
        if not match:
            continue
        parts = [part.strip() for part in match["head"].split(",")]
        # Error and warning lines ("Error! ...", "Deprecated feature: ...") carry spaces
        # inside a field; real entries never do.
        if any(not part or " " in part for part in parts):
            continue
        if "/" in parts[0]:
            module, _, version = parts[0].partition("/")
            rest = parts[1:]
        elif len(parts) >= 2:
            module, version, rest = parts[0], parts[1], parts[2:]
        else:
            continue
        if not module or not version or len(rest) > 2:
            continue
        note = match["note"]
        if note and note.startswith("(") and note.endswith(")"):
            note = note[1:-1]
        entries.append(
            DkmsEntry(
                module=module,
                version=version,
                kernel=rest[0] if rest else None,
                arch=rest[1] if len(rest) > 1 else None,
                status=match["status"],
                note=note or None,
            )
        )
    return entries


# --- Loaded modules, disk, GPU processes ------------------------------------------------------


def parse_lsmod_has(text: str, module: str) -> bool:
    """Whether ``module`` is loaded, from ``lsmod`` or ``/proc/modules`` output.

    Only the first column counts: ``nvidia`` in another module's "used by" list is not a
    loaded ``nvidia`` module of its own.
    """
    wanted = module.replace("-", "_")
    return any(line.split()[:1] == [wanted] for line in text.splitlines())


def parse_df_avail(text: str) -> int | None:
    """Free bytes from ``df -B1 --output=avail PATH`` (a header line, then one number)."""
    for line in text.splitlines():
        value = line.strip()
        if value.isdigit():
            return int(value)
    return None


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU, from ``nvidia-smi --query-compute-apps``."""

    pid: int | None
    process_name: str | None
    used_memory_mib: int | None
    gpu_uuid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> dict[str, Any]:  # what pyinfra's CLI calls to print a fact
        return self.to_dict()


GPU_PROCESS_FIELDS = ("pid", "process_name", "used_memory")
# nvidia-smi accepts several names for one property and prints its own in the header.
_PROCESS_FIELD_ALIASES = {"name": "process_name", "used_gpu_memory": "used_memory"}
_PLACEHOLDER_RE = re.compile(r"^\[?(N/A|Not Supported|Insufficient Permissions)\]?$")


def _process_value(raw: str) -> str | None:
    value = raw.strip()
    return None if not value or _PLACEHOLDER_RE.match(value) else value


def _mib(value: str | None) -> int | None:
    if value is None:
        return None
    number = value.removesuffix("MiB").strip()
    return int(number) if number.isdigit() else None


def parse_gpu_processes(
    text: str, fields: tuple[str, ...] = GPU_PROCESS_FIELDS
) -> list[GpuProcess]:
    """Rows of ``nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv``.

    Works with or without the header (``fields`` names the columns when there is none)
    and with or without units; lines that are not rows of the query (errors, "No running
    processes found") are skipped.
    """
    columns = [_PROCESS_FIELD_ALIASES.get(field, field) for field in fields]
    processes = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        names = [re.sub(r"\s*\[.*\]$", "", cell) for cell in cells]
        if {"pid", "process_name", "gpu_uuid"} & {_PROCESS_FIELD_ALIASES.get(n, n) for n in names}:
            columns = [_PROCESS_FIELD_ALIASES.get(name, name) for name in names]
            continue
        if len(cells) != len(columns):
            continue
        row = dict(zip_strict(columns, (_process_value(cell) for cell in cells)))
        pid = row.get("pid")
        if pid is not None and not pid.isdigit():
            continue
        if "pid" not in row and not (row.get("gpu_uuid") or "").startswith("GPU-"):
            continue
        processes.append(
            GpuProcess(
                pid=int(pid) if pid is not None else None,
                process_name=row.get("process_name"),
                used_memory_mib=_mib(row.get("used_memory")),
                gpu_uuid=row.get("gpu_uuid"),
            )
        )
    return processes
