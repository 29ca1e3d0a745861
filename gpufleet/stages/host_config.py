"""What the host probe reads of configuration others write: apt, unit overrides, module loaders.

These are read in the probe's one round trip (gpufleet.stages.host_probe), so they are part of
every host's plan inputs: a foreign drop-in, source, pin, keyring or nouveau loader that
appears later changes the probe, and a deploy stamp no longer holds (gpufleet.stamp.inputs).
gpufleet.stages.foreign decides what of it changes what gpufleet manages.
"""

from __future__ import annotations

from dataclasses import dataclass

# gpufleet's own units (their unit files are gpufleet's, under /etc/systemd/system) and the
# vendors' units gpufleet keeps enabled and running (their unit files are the packages').
OWN_UNITS = ("gpufleet-periodic.service", "gpufleet-periodic.timer")
VENDOR_UNITS = (
    "nvidia-persistenced.service",
    "nvidia-fabricmanager.service",
    "nvidia-dcgm.service",
    "prometheus-node-exporter.service",
    "apt-cacher-ng.service",
    "nginx.service",
)
# Where the administrator (/etc) and the running system (/run) override units; systemd.unit(5)
# "Unit File Load Path". The packages' own drop-ins (/usr/lib, /lib) are the vendor's.
OVERRIDE_ROOTS = ("/etc/systemd/system", "/run/systemd/system")
# Where modprobe(8) and systemd-modules-load read: modprobe.d(5), modules-load.d(5), and
# Debian's /etc/modules.
MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")
MODULES_LOAD_DIRS = (
    "/etc/modules-load.d",
    "/run/modules-load.d",
    "/usr/lib/modules-load.d",
    "/lib/modules-load.d",
)
# gpufleet's own files among those others write beside (defined here, the leaf every stage,
# gpufleet.stages.foreign and drift import them from; no other module gives them a name).
SOURCES = "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
DRIVER_PREFERENCES = "/etc/apt/preferences.d/gpufleet-nvidia-driver"
# Named to sort before any other preferences file: apt takes the first matching record.
DISTRO_DRIVER_BLOCK = "/etc/apt/preferences.d/00-gpufleet-no-distro-nvidia-driver"
NOUVEAU_BLACKLIST = "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"
NODE_EXPORTER_DROPIN = (
    "/etc/systemd/system/prometheus-node-exporter.service.d/gpufleet-textfile.conf"
)
# The fleet cache's files (gpufleet.stages.fleet_cache reads them on its host).
ACNG_SECURITY = "/etc/apt-cacher-ng/zz_gpufleet_security.conf"
NGINX_DEFAULT_SITE = "/etc/nginx/sites-enabled/default"
# gpufleet's own drop-in for apt-cacher-ng (the fleet cache's boot order; not a foreign one).
ACNG_DROPIN = "/etc/systemd/system/apt-cacher-ng.service.d/gpufleet-bind.conf"


def drop_in_dirs(unit: str) -> list[str]:
    """Every drop-in folder systemd reads for ``unit`` under ``OVERRIDE_ROOTS``: the unit's
    own, its dash prefixes' (``gpufleet-.service.d``) and its type's (``service.d``), as
    systemd.unit(5) lists them.

    Example: ``drop_in_dirs("a-b.timer")[:3] == ["/etc/systemd/system/a-b.timer.d",
    "/etc/systemd/system/a-.timer.d", "/etc/systemd/system/timer.d"]``
    """
    name, _, kind = unit.rpartition(".")
    parts = name.split("-")
    names = [unit] + [f"{'-'.join(parts[:i])}-.{kind}" for i in range(len(parts) - 1, 0, -1)]
    names.append(kind)
    return [f"{root}/{each}.d" for root in OVERRIDE_ROOTS for each in names]


def override_files(unit: str) -> list[str]:
    """The unit file paths that would shadow ``unit``'s own: a runtime copy or mask in /run,
    and, for a vendor's unit, an administrator's copy or mask in /etc."""
    paths = [f"/run/systemd/system/{unit}"]
    if unit not in OWN_UNITS:
        paths.append(f"/etc/systemd/system/{unit}")
    return paths


def _words(paths: list[str] | tuple[str, ...]) -> str:
    # gpufleet's own constant paths: no character a shell would act on.
    return " ".join(paths)


# Appended to the probe's script (it shares the probe's sections and ``_SECTION`` marker).
# Each file line is printed as FILE<TAB>LINE (comments and deb822 continuations left out, a
# blank line as FILE<TAB>) with the shell's own read: no process per file.
_LINES = r"""gpufleet_lines() {
  while IFS= read -r l || [ -n "$l" ]; do
    case $l in '#'*) continue ;; esac
    case $2$l in sources[[:space:]]*) continue ;; esac
    printf '%s\t%s\n' "$1" "$l"
  done <"$1"
}
"""

SCRIPT = (
    _LINES
    + """echo '{s}apt_sources'
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && gpufleet_lines "$f" list
done
for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && gpufleet_lines "$f" sources; done
echo '{s}apt_pins'
for f in /etc/apt/preferences /etc/apt/preferences.d/*; do
  [ -f "$f" ] && gpufleet_lines "$f" pref
done
echo '{s}apt_keyrings'
for f in /etc/apt/trusted.gpg /etc/apt/trusted.gpg.d/*; do [ -f "$f" ] && echo "$f"; done
echo '{s}unit_overrides'
for d in """
    + _words(sorted({d for u in (*OWN_UNITS, *VENDOR_UNITS) for d in drop_in_dirs(u)}))
    + """; do
  for f in "$d"/*.conf; do [ -e "$f" ] && echo "$f"; done
done
for f in """
    + _words([p for u in (*OWN_UNITS, *VENDOR_UNITS) for p in override_files(u)])
    + """; do
  if [ -L "$f" ]; then printf '%s -> %s\\n' "$f" "$(readlink "$f")"
  elif [ -e "$f" ]; then echo "$f"; fi
done
echo '{s}module_loaders'
for f in """
    + _words([f"{d}/*.conf" for d in (*MODPROBE_DIRS, *MODULES_LOAD_DIRS)])
    + """ /etc/modules; do
  [ -f "$f" ] || continue
  while IFS= read -r l || [ -n "$l" ]; do
    case $l in *nouveau*) printf '%s\\t%s\\n' "$f" "$l" ;; esac
  done <"$f"
done
echo '{s}acng_admin'
if [ -e """
    + ACNG_SECURITY
    + """ ]; then
  stat -c '%U:%G:%a' """
    + ACNG_SECURITY
    + """ 2>/dev/null
  grep -c '^AdminAuth: gpufleet:[A-Za-z0-9]\\{32\\}$' """
    + ACNG_SECURITY
    + """ 2>/dev/null
fi
echo '{s}nginx_default'
{ [ -e """
    + NGINX_DEFAULT_SITE
    + " ] || [ -L "
    + NGINX_DEFAULT_SITE
    + """ ]; } && echo present
[ -e /etc/nginx/nginx.conf ] || echo not-installed
"""
)

SECTIONS = (
    "apt_sources",
    "apt_pins",
    "apt_keyrings",
    "unit_overrides",
    "module_loaders",
    "acng_admin",
    "nginx_default",
)


@dataclass(frozen=True)
class FileLine:
    """One line of a configuration file: ``path`` and its text ("" for a blank line)."""

    path: str
    text: str


@dataclass(frozen=True)
class HostConfig:
    """The configuration the probe read; every tuple in the order the host listed it."""

    apt_sources: tuple[FileLine, ...] = ()
    apt_pins: tuple[FileLine, ...] = ()
    apt_keyrings: tuple[str, ...] = ()
    # "PATH" of each drop-in or shadowing unit file; "PATH -> TARGET" for a link (a mask).
    unit_overrides: tuple[str, ...] = ()
    module_loaders: tuple[FileLine, ...] = ()  # lines naming nouveau
    acng_admin: tuple[str, ...] = ()  # gpufleet.operations.acng.IN_ORDER when in order
    nginx_default_site: bool = False


def _lines(values: list[str]) -> tuple[FileLine, ...]:
    found = []
    for value in values:
        path, _tab, text = value.partition("\t")
        found.append(FileLine(path, text.strip()))
    return tuple(found)


def parse_config(sections: dict[str, list[str]]) -> HostConfig:
    """The ``HostConfig`` of the probe's sections (lines as ``parse_probe`` keeps them)."""
    return HostConfig(
        apt_sources=_lines(sections.get("apt_sources", [])),
        apt_pins=_lines(sections.get("apt_pins", [])),
        apt_keyrings=tuple(sections.get("apt_keyrings", [])),
        unit_overrides=tuple(sections.get("unit_overrides", [])),
        module_loaders=_lines(sections.get("module_loaders", [])),
        acng_admin=tuple(sections.get("acng_admin", [])),
        # nginx's first install links its default site: a host without nginx yet gets it
        # (fleet_cache removes it after the install in the same run, not one run later)
        nginx_default_site=bool(
            {"present", "not-installed"} & set(sections.get("nginx_default", []))
        ),
    )
