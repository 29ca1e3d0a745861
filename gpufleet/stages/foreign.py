"""Configuration others wrote that changes what gpufleet manages: found, reported, repaired.

The host probe reads it (gpufleet.stages.host_config, no round trip of its own). What gpufleet
owns the behaviour of is repaired by the stage that manages it, as an operation (so that a
plan, and ``gpufleet drift``, name it): a source or pin of NVIDIA's repository beside
gpufleet's own, an override of gpufleet's own units, a line that loads nouveau. What is the
administrator's to decide (an override of a vendor's unit, a mixed file, a key trusted for
every source) is reported on every run, a stamped one included, as a ``gpufleet drift:``
warning that ``gpufleet drift`` counts as drift.

Example::

    for finding in findings(plan):
        print(finding.sentence, "(repaired)" if finding.repaired else "(reported)")
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from gpufleet.spec import NodeSpec
from gpufleet.stages import foreign_apt, host_config
from gpufleet.stages.node import NodePlan

# The warning prefix `gpufleet drift` reads as a finding (gpufleet.drift.plan).
DRIFT_PREFIX = "gpufleet drift: "
NOUVEAU_NOTE = "gpufleet: nouveau must not load beside the NVIDIA driver"
INITRAMFS = (
    "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u; "
    "else echo 'no update-initramfs on this host: initramfs left as is'; fi"
)
# Where modprobe.d and modules-load.d lines are the administrator's (gpufleet edits those);
# /run is the running system's and /usr/lib, /lib the packages'.
_ADMIN_MODULE_FILES = ("/etc/modprobe.d/", "/etc/modules-load.d/", "/etc/modules")
_HARMLESS_INSTALL = ("/bin/false", "/bin/true", "/usr/bin/false", "/usr/bin/true", "false", "true")


@dataclass(frozen=True)
class Finding:
    """One foreign setting: ``kind`` (``apt-source``, ``apt-pin``, ``keyring``, ``unit``,
    ``nouveau``), the file, a sentence, and whether the deploy repairs it."""

    kind: str
    path: str
    sentence: str
    repaired: bool
    line: str = ""  # the line a repair comments out (nouveau loaders)


def nvidia_repo_bases(plan: NodePlan) -> list[str]:
    """The URLs of NVIDIA's repository a host may name: gpufleet's own, upstream's, the
    cache's remap and the cache's upstream."""
    bases = [plan.spec.nvidia_repo_url, NodeSpec().nvidia_repo_url]
    if plan.cache is not None:
        bases += [plan.cache.nvidia_repo_url, plan.cache.spec.nvidia_repo_url]
    return bases


def findings(plan: NodePlan) -> list[Finding]:
    """Every foreign setting of the host's probe that bears on what gpufleet manages."""
    config = plan.state.config
    found: list[Finding] = []
    # apt sources of NVIDIA's repository besides gpufleet's own (the cuda-keyring one-line
    # file has an operation of its own in nvidia_repo).
    keyring_list = None
    if plan.resolution is not None:
        keyring_list = (
            f"/etc/apt/sources.list.d/cuda-{plan.resolution.repo_distro}-"
            f"{plan.resolution.repo_arch}.list"
        )
    bases = nvidia_repo_bases(plan)
    by_file: dict[str, list[bool]] = {}
    for entry in foreign_apt.apt_sources(config.apt_sources):
        if entry.path not in (host_config.SOURCES, keyring_list):
            nvidia = any(foreign_apt.under(uri, bases) for uri in entry.uris)
            by_file.setdefault(entry.path, []).append(nvidia)
    found += _per_file(
        "apt-source",
        by_file,
        "/etc/apt/sources.list.d/",
        "adds NVIDIA's repository beside gpufleet's",
        "with other sources (remove it)",
    )
    found += _pins(plan)
    found += [
        Finding("keyring", path, f"{path} trusts an NVIDIA key for every apt source", False)
        for path in config.apt_keyrings
        if foreign_apt.NVIDIA_PACKAGE.search(posixpath.basename(path))
    ]
    found += _unit_overrides(config.unit_overrides, plan)
    found += _nouveau_loaders(config.module_loaders, plan)
    return found


def _pins(plan: NodePlan) -> list[Finding]:
    own = {host_config.DRIVER_PREFERENCES, host_config.DISTRO_DRIVER_BLOCK}
    if plan.resolution is not None and plan.resolution.pinning_package:
        # What NVIDIA's pinning package installs (the name the sandbox's stand-in gives it;
        # unverified against the real package, whose text NVIDIA does not publish).
        own.add(f"/etc/apt/preferences.d/{plan.resolution.pinning_package}")
    by_file: dict[str, list[bool]] = {}
    for pin in foreign_apt.apt_pins(plan.state.config.apt_pins):
        if pin.path not in own:
            by_file.setdefault(pin.path, []).append(foreign_apt.names_nvidia(pin))
    return _per_file(
        "apt-pin",
        by_file,
        "/etc/apt/preferences.d/",
        "pins NVIDIA packages beside gpufleet's branch lock",
        "with other records (remove them)",
    )


def _per_file(
    kind: str, by_file: dict[str, list[bool]], folder: str, what: str, mixed: str
) -> list[Finding]:
    """A finding per file with an NVIDIA entry (``by_file``: per entry, whether it is one);
    a file of ``folder`` holding nothing else is removed by the deploy."""
    found = []
    for path, flags in by_file.items():
        if any(flags):
            alone = all(flags) and path.startswith(folder)
            why = "(removed by the deploy)" if alone else mixed
            found.append(Finding(kind, path, f"{path} {what} {why}", repaired=alone))
    return found


def managed_units(plan: NodePlan) -> set[str]:
    """The units gpufleet keeps enabled (and its own written) on this host."""
    spec = plan.spec
    units = {"nvidia-fabricmanager.service", "nvidia-dcgm.service"}  # where installed
    if spec.persistenced:
        units.add("nvidia-persistenced.service")
    if spec.periodic_checks:
        units.update(host_config.OWN_UNITS)
        if spec.node_exporter:
            units.add("prometheus-node-exporter.service")
    if plan.is_cache_host:
        units.update({"apt-cacher-ng.service", "nginx.service"})
    return units


def _unit_overrides(entries: tuple[str, ...], plan: NodePlan) -> list[Finding]:
    managed = managed_units(plan)
    found = []
    for entry in entries:
        path, arrow, target = entry.partition(" -> ")
        if path in (host_config.NODE_EXPORTER_DROPIN, host_config.ACNG_DROPIN):
            continue  # gpufleet's own drop-ins (textfile_dir; the fleet cache's boot order)
        unit, kind = _unit_of(path, managed)
        if unit is None:
            continue  # not a unit managed here, or every unit of a type (container managers)
        what = f"masks {unit}" if arrow and target == "/dev/null" else f"overrides {unit}"
        own = unit in host_config.OWN_UNITS and kind == "exact"
        found.append(
            Finding(
                "unit",
                path,
                f"{path} {what} " + ("(removed by the deploy)" if own else "(gpufleet keeps it)"),
                repaired=own,
            )
        )
    return found


def _unit_of(path: str, units: set[str]) -> tuple[str | None, str]:
    """The managed unit a drop-in or shadowing file is for, and whether it names the unit
    exactly (``exact``) or by a dash prefix (``prefix``)."""
    folder, name = posixpath.split(path)
    if name in units:
        return name, "exact"
    base = posixpath.basename(folder).removesuffix(".d")
    if base in units:
        return base, "exact"
    if "-." in base:
        prefix, kind = base.split("-.", 1)
        matching = sorted(u for u in units if u.startswith(prefix + "-") and u.endswith(kind))
        return (", ".join(matching) or None), "prefix"
    return None, "type"


def nouveau_loads(path: str, text: str) -> bool:
    """Whether a line of a modprobe.d or modules-load.d file loads nouveau (modprobe.d(5):
    ``install nouveau CMD``, ``softdep M pre|post: nouveau``, ``alias X nouveau``;
    modules-load.d(5) and /etc/modules: the name alone)."""
    words = text.split("#", 1)[0].split()
    if not words:
        return False
    if "/modules-load.d/" in path or path == "/etc/modules":
        return words == ["nouveau"] and not text.lstrip().startswith(";")
    if words[0] == "install" and len(words) > 2 and words[1] == "nouveau":
        return words[2] not in _HARMLESS_INSTALL
    if words[0] == "softdep" and len(words) > 2 and words[1] != "nouveau":
        return "nouveau" in words[2:]
    return words[0] == "alias" and len(words) == 3 and words[2] == "nouveau"


def _nouveau_loaders(lines: tuple[host_config.FileLine, ...], plan: NodePlan) -> list[Finding]:
    found: list[Finding] = []
    if plan.spec.gpu_less:
        return found  # no NVIDIA GPU for nouveau to take
    for line in lines:
        if line.path == host_config.NOUVEAU_BLACKLIST or not nouveau_loads(line.path, line.text):
            continue
        ours = line.path.startswith(_ADMIN_MODULE_FILES)
        found.append(
            Finding(
                "nouveau",
                line.path,
                f"{line.path} loads nouveau ({line.text!r}) "
                + ("(commented out by the deploy)" if ours else "(remove it)"),
                repaired=ours,
                line=line.text,
            )
        )
    return found


def reported(plan: NodePlan) -> list[str]:
    """The sentences of what the deploy leaves to the administrator."""
    return [f.sentence for f in findings(plan) if not f.repaired]


# What each repaired kind's operation is called (gpufleet.drift.sentences reads these names).
REPAIRS = {
    "apt-source": "foreign source of NVIDIA's repository removed",
    "apt-pin": "foreign pin of NVIDIA packages removed",
    "unit": "foreign overrides of gpufleet's units removed",
    "nouveau": "nouveau loader commented out",
}


def repair(plan: NodePlan, kind: str) -> None:
    """Plan the repair of the host's findings of ``kind`` (nothing when it has none): apt
    sources and pins removed, overrides of gpufleet's units removed (systemd reloaded),
    nouveau loaders commented out (the initramfs rebuilt)."""
    from gpufleet.operations import files as gpufleet_files
    from gpufleet.stages import op_keys

    mine = [f for f in findings(plan) if f.repaired and f.kind == kind]
    if not mine:
        return
    if kind == "unit":
        paths = sorted({f.path for f in mine})
        with op_keys.keyed(" ".join(paths)):
            gpufleet_files.removed(
                name=f"{', '.join(paths)}: {REPAIRS[kind]}",
                paths=paths,
                then=["systemctl daemon-reload", "systemctl try-restart gpufleet-periodic.timer"],
            )
        return
    if kind == "nouveau":
        files: dict[str, list[str]] = {}
        for f in mine:
            files.setdefault(f.path, []).append(f.line)
        for index, (path, lines) in enumerate(sorted(files.items())):
            with op_keys.keyed(path):
                gpufleet_files.lines_commented(
                    name=f"{path}: {REPAIRS[kind]}",
                    path=path,
                    lines=lines,
                    note=NOUVEAU_NOTE,
                    then=[INITRAMFS] if index == len(files) - 1 else [],
                )
        return
    for path in sorted({f.path for f in mine}):
        with op_keys.keyed(path):
            gpufleet_files.removed(name=f"{path}: {REPAIRS[kind]}", paths=[path])
