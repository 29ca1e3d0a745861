"""One plan-time fact reading all that preflight and the stages branch on, in one round trip."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpufleet.matrix import gpu_by_device_id
from gpufleet.stages import host_config
from gpufleet.stages.host_config import HostConfig

# The gpufleet file that records the driver branch this tool installed; its absence next to an
# installed driver is what makes that driver "foreign".
DRIVER_MARKER = "/etc/gpufleet/driver-branch"

# Packages whose version names the installed driver (Ubuntu/Debian distro driver packages and
# NVIDIA's repository metapackages alike), as dpkg-query's glob patterns. The fabric packages
# follow the driver to the last digit and are replaced with it on a branch change: Fabric
# Manager, NSCQ and NVSDM, suffixed up to R575 (``libnvidia-nscq-575``) and unsuffixed from
# R580 (``libnvidia-nscq``), both listed. NVLSM (``nvlsm``) is versioned by its own release,
# not the driver's, and stays.
DRIVER_PACKAGE_PATTERNS = (
    "nvidia-driver*",
    "nvidia-open*",
    "cuda-drivers*",
    "nvidia-kernel-common*",
    "nvidia-dkms*",
    "nvidia-kernel-source*",
    "libnvidia-compute*",
    "nvidia-fabricmanager*",
    "libnvidia-nscq*",
    "libnvsdm*",
    "nvidia-driver-pinning*",
    "nvidia-kernel-dkms",
)

_SECTION = "##gpufleet-probe:"

# Each section prints under a marker; every command tolerates its tool being absent so that a
# bare host (no lspci, no mokutil, no nvidia-smi) answers in one go. Files are read with the
# shell's own `read` and tests, not a `cat` each: a GPU server has hundreds of PCI functions,
# and every deploy (a no-op's too) runs this. Free disk is one `df` over every path's nearest
# existing parent (a `df` per path only when that one fails, so that a bad path costs no other
# path its line); the parser gives the paths on one filesystem that filesystem's first reading.
_SCRIPT = """\
echo '{s}os'; cat /etc/os-release 2>/dev/null
env=$1; shift
echo '{s}arch'; uname -m
echo '{s}kernel'; uname -r
echo '{s}pci'
for d in /sys/bus/pci/devices/*; do
  {{ read -r v <"$d/vendor"; }} 2>/dev/null || continue
  [ "$v" = 0x10de ] || continue
  {{ read -r c <"$d/class"; read -r i <"$d/device"; }} 2>/dev/null
  echo "${{d##*/}} $c $i"
done
echo '{s}secure_boot'
for f in /sys/firmware/efi/efivars/SecureBoot-*; do
  [ -e "$f" ] && od -An -t u1 "$f" | tr -s ' ' '\\n' | grep . | tail -n 1
  break
done
echo '{s}loaded'; [ -e /sys/module/nvidia/version ] && cat /sys/module/nvidia/version
echo '{s}installed_module'; modinfo -F version nvidia 2>/dev/null
echo '{s}nouveau'; [ -d /sys/module/nouveau ] && echo loaded
echo '{s}runfile'; [ -e /usr/bin/nvidia-uninstall ] && echo /usr/bin/nvidia-uninstall
echo '{s}packages'
dpkg-query -W -f='${{db:Status-Abbrev}} ${{Package}} ${{Version}}\\n' {patterns} 2>/dev/null
echo '{s}held'
dpkg-query -W -f='${{db:Status-Want}} ${{Package}}\\n' 2>/dev/null | sed -n 's/^hold //p'
echo '{s}marker'; [ -e {marker} ] && cat {marker} 2>/dev/null
echo '{s}gpu_processes'
if [ -d /sys/module/nvidia ] && command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null
fi
echo '{s}disk'
n=$#
for p in "$@"; do
  q=$p; while [ ! -e "$q" ]; do q=$(dirname "$q"); done
  set -- "$@" "$q"
done
if [ "$n" -gt 0 ]; then
  if ! d=$(shift "$n"; df -Pk "$@" 2>/dev/null); then
    d=$(shift "$n"; echo; for q in "$@"; do
      l=$(df -Pk "$q" 2>/dev/null | sed -n 2p); echo "${{l:--}}"
    done)
  fi
  printf '%s\n' "$d" | {{
    read -r _; i=0
    for p in "$@"; do
      [ "$i" -lt "$n" ] || break
      i=$((i + 1)); read -r l || l=-; printf '%s\t%s\n' "$p" "$l"
    done
  }}
fi
echo '{s}dpkg'
n=0
for f in /var/lib/dpkg/updates/*; do
  case ${{f##*/}} in *[!0-9]*) continue ;; esac
  [ $n -lt 3 ] || break
  n=$((n + 1)); echo "pending update record ${{f##*/}}"
done
dpkg --audit 2>/dev/null | head -n 40
echo '{s}env'; [ -x "$env/bin/python" ] && echo present
echo '{s}shim_mok'; [ -e /var/lib/shim-signed/mok/MOK.der ] && echo present
echo '{s}systemd'; [ -d /run/systemd/system ] || echo absent
"""


@dataclass(frozen=True)
class PciDevice:
    """An NVIDIA PCI function: ``slot`` ("0000:3b:00.0"), ``pci_class`` ("0302"), ``device_id``."""

    slot: str
    pci_class: str
    device_id: str

    @property
    def is_gpu(self) -> bool:
        # 0x03xx: display controllers (VGA 0300, 3D 0302); NVSwitch bridges are 0x0680.
        return self.pci_class.startswith("03")

    @property
    def is_nvswitch(self) -> bool:
        model = gpu_by_device_id(self.device_id)
        return bool(model and model.is_nvswitch) or self.pci_class == "0680"


@dataclass(frozen=True)
class HostState:
    """What a host is, and what of NVIDIA's stack it already has, as read before any change."""

    os_id: str = ""
    os_version: str = ""
    os_pretty: str = ""
    arch: str = ""
    kernel: str = ""
    pci: tuple[PciDevice, ...] = ()
    secure_boot: bool | None = None
    loaded_driver: str | None = None
    installed_module: str | None = None
    nouveau_loaded: bool = False
    runfile_uninstaller: str | None = None
    packages: dict[str, str] = field(default_factory=dict, hash=False)
    held: tuple[str, ...] = ()  # packages on hold (dpkg's selection, as apt-mark sets it), sorted
    marker_branch: int | None = None
    gpu_processes: tuple[str, ...] = ()
    free_disk_kib: int | None = None  # on /
    # Path the deploy writes to -> (free KiB, mount point) of the filesystem holding it (or
    # its nearest existing parent).
    free_disk: dict[str, tuple[int, str]] = field(default_factory=dict, hash=False)
    # What `dpkg --audit` and /var/lib/dpkg/updates/ say is unfinished; empty when clean.
    dpkg_problems: tuple[str, ...] = ()
    env_present: bool = False
    shim_mok_present: bool = False
    systemd_booted: bool = True  # sd_booted(3): /run/systemd/system exists (said when not)
    # Configuration others write that bears on what gpufleet manages (gpufleet.stages.foreign).
    config: HostConfig = field(default_factory=HostConfig)

    @property
    def dpkg_interrupted(self) -> bool:
        """dpkg was stopped mid-run (killed, power lost): apt refuses to work until repaired."""
        return bool(self.dpkg_problems)

    @property
    def gpus(self) -> list[PciDevice]:
        return [d for d in self.pci if d.is_gpu]

    @property
    def has_nvswitch(self) -> bool:
        return any(d.is_nvswitch for d in self.pci)

    @property
    def device_ids(self) -> list[str]:
        return [d.device_id for d in self.pci]

    @property
    def installed_branches(self) -> set[int]:
        """Driver branches named by the versions of installed driver packages."""
        branches = {branch_of_package_version(v) for v in self.packages.values()}
        return {branch for branch in branches if branch is not None}

    def other_branch_packages(self, branch: int) -> list[str]:
        """Installed driver and fabric packages whose version names a branch other than
        ``branch``, sorted: what a change to ``branch`` removes before installing.

        Example: on a host of R575 with Fabric Manager, ``other_branch_packages(580) ==
        ["libnvidia-nscq-575", "nvidia-fabricmanager-575", "nvidia-open-575"]``
        """
        return sorted(
            name
            for name, version in self.packages.items()
            if branch_of_package_version(version) not in (None, branch)
        )

    @property
    def distro_driver_packages(self) -> dict[str, str]:
        """Driver packages built by the distribution, not NVIDIA's repository.

        Ubuntu's archive versions carry the release (``535.183.01-0ubuntu0.22.04.1``), Debian's
        a ``~deb12u1`` suffix; NVIDIA's repository builds end ``-0ubuntu1`` or ``-1``.
        """
        return {
            name: version
            for name, version in self.packages.items()
            if re.search(r"ubuntu0\.\d+\.\d+|[~+]deb\d+", version)
        }


def branch_of_package_version(version: str) -> int | None:
    """The driver branch a package version names, else None.

    Driver packages carry the full driver version (``"1:570.195.03-0ubuntu1"`` -> 570); NVIDIA's
    pinning packages only the branch (``nvidia-driver-pinning-580`` is ``"580-1ubuntu1"`` -> 580).
    """
    match = re.match(r"^(?:\d+:)?(\d{3})(?:\.\d+|-|$)", version)
    return int(match.group(1)) if match else None


class HostProbe(FactBase[HostState]):
    """
    Reads OS, architecture, kernel, NVIDIA PCI functions, Secure Boot, the loaded and installed
    driver, installed driver packages, packages on hold, GPU processes, free disk on each of
    ``disk_paths``, dpkg's unfinished work, the environment's presence, and the configuration
    others write beside gpufleet's (gpufleet.stages.host_config).

    .. code:: python

        state = host.get_fact(
            HostProbe, env_dir="/opt/gpufleet/miniforge3/envs/tf", disk_paths=("/", "/opt")
        )
        state.os_id, state.gpus, state.installed_branches, state.dpkg_interrupted
    """

    @override
    def command(self, env_dir: str, disk_paths: tuple[str, ...] = ("/",)) -> StringCommand:
        script = _SCRIPT.format(
            s=_SECTION,
            patterns=" ".join(f"'{p}'" for p in DRIVER_PACKAGE_PATTERNS),
            marker=DRIVER_MARKER,
        )
        script += host_config.SCRIPT.replace("{s}", _SECTION) + "true\n"
        return StringCommand(
            "sh",
            "-c",
            QuoteString(script),
            "gpufleet-probe",
            QuoteString(env_dir),
            *[QuoteString(path) for path in disk_paths],
        )

    @staticmethod
    @override
    def default() -> HostState:
        return HostState()

    @override
    def process(self, output: list[str]) -> HostState:
        return parse_probe(output)


# C0 and C1 control characters (ESC, CSI, BEL, ...): what the host says is printed in plans and
# refusals, and must not drive the operator's terminal (titles, clipboard, hyperlinks). TAB is
# kept: the probe's own disk lines use it as their separator.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def parse_probe(lines: list[str]) -> HostState:
    """Turn the probe's sectioned output into a ``HostState`` (control characters dropped)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in lines:
        line = _CONTROL.sub("", raw)
        if line.startswith(_SECTION):
            current = sections.setdefault(line[len(_SECTION) :].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())

    def first(name: str) -> str | None:
        values = sections.get(name) or []
        return values[0] if values else None

    os_release = _parse_os_release(sections.get("os", []))
    marker = first("marker")
    free_disk = _parse_disk(sections.get("disk", []))
    root = free_disk.get("/")
    return HostState(
        os_id=os_release.get("ID", ""),
        os_version=os_release.get("VERSION_ID", ""),
        os_pretty=os_release.get("PRETTY_NAME", ""),
        arch=first("arch") or "",
        kernel=first("kernel") or "",
        pci=tuple(_parse_pci(sections.get("pci", []))),
        secure_boot=_parse_secure_boot(first("secure_boot")),
        loaded_driver=first("loaded"),
        installed_module=first("installed_module"),
        nouveau_loaded=first("nouveau") == "loaded",
        runfile_uninstaller=first("runfile"),
        packages=_parse_packages(sections.get("packages", [])),
        held=tuple(sorted(set(sections.get("held", [])))),
        marker_branch=int(marker) if marker and marker.isdigit() else None,
        gpu_processes=tuple(sections.get("gpu_processes", [])),
        free_disk_kib=root[0] if root else None,
        free_disk=free_disk,
        dpkg_problems=tuple(sections.get("dpkg", [])),
        env_present=first("env") == "present",
        shim_mok_present=first("shim_mok") == "present",
        systemd_booted=first("systemd") != "absent",
        config=host_config.parse_config(sections),
    )


def _parse_os_release(lines: list[str]) -> dict[str, str]:
    values = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value.strip().strip('"').strip("'")
    return values


def _parse_pci(lines: list[str]) -> list[PciDevice]:
    devices = []
    for line in lines:
        bits = line.split()
        if len(bits) == 3:
            slot, pci_class, device = bits
            # sysfs prints 0x030200 (class, subclass, prog-if) and 0x20b0.
            devices.append(PciDevice(slot, pci_class.lower()[2:6], device.lower()[2:]))
    return devices


def _parse_secure_boot(value: str | None) -> bool | None:
    # The SecureBoot EFI variable: 4 attribute bytes, then 1 (enabled) or 0 (disabled).
    if value is None:
        return None
    return value == "1"


def _parse_packages(lines: list[str]) -> dict[str, str]:
    packages = {}
    for line in lines:
        bits = line.split()
        # "ii " installed, "hi " installed and held; anything else is not installed.
        if len(bits) == 3 and bits[0] in ("ii", "hi"):
            packages[bits[1]] = bits[2]
    return packages


def _parse_disk(lines: list[str]) -> dict[str, tuple[int, str]]:
    """``PATH<TAB>df line`` per path; a bare df line (older probes) is that of ``/``.

    df reads each argument's filesystem on its own (a statfs each), so two paths on one
    filesystem can be read a few KiB apart while something writes there. A filesystem has one
    amount free: every path on it gets the first reading of that filesystem and mount point.
    """
    free = {}
    readings: dict[tuple[str, str], int] = {}
    for line in lines:
        path, tab, df_line = line.partition("\t")
        if not tab:
            path, df_line = "/", line
        # POSIX df -Pk: Filesystem 1024-blocks Used Available Capacity Mounted-on
        bits = df_line.split()
        if len(bits) >= 6 and bits[3].isdigit():
            available = readings.setdefault((bits[0], bits[5]), int(bits[3]))
            free[path] = (available, bits[5])
    return free
