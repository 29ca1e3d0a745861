"""What one stand-in Debian package holds, and the templates its files are made from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from gpufleet.sandbox.state import SandboxError

STANDIN = "gpufleet sandbox stand-in"
MAINTAINER = "gpufleet sandbox stand-in <gpufleet-sandbox@localhost.invalid>"

_PLACEHOLDER = re.compile(r"@[A-Z_]+@")
# Debian policy 5.6.1 (package names) and 5.6.12 (versions; an epoch as DCGM's "1:").
_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")
_VERSION = re.compile(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~]*(-[A-Za-z0-9.+~]+)?$")


class StandinError(SandboxError):
    """The stand-in repository cannot be built; the message says why and what to do."""


@dataclass(frozen=True)
class StandinFile:
    """A file the package installs: absolute ``path``, text ``content`` and permission ``mode``."""

    path: str
    content: str
    mode: int = 0o644


@dataclass(frozen=True)
class StandinPackage:
    """One stand-in package carrying a real NVIDIA package name, version and dependencies.

    Example::

        StandinPackage("libnccl2", "2.27.7-1+cuda12.9", "amd64", "NCCL runtime")
    """

    name: str
    version: str
    architecture: str
    summary: str
    depends: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    files: tuple[StandinFile, ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()  # (link path, target)
    postinst: str = ""
    prerm: str = ""
    section: str = "NVIDIA"

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise StandinError(
                f"{self.name!r} is not a valid Debian package name (lower-case letters, digits,"
                " '.', '+', '-'). Fix the name that produced it."
            )
        if not _VERSION.match(self.version):
            raise StandinError(
                f"{self.name}: {self.version!r} is not a valid Debian version. Fix the version"
                " table that produced it."
            )

    @property
    def deb_filename(self) -> str:
        """``name_version_arch.deb``, the file name dpkg-name and NVIDIA's repository use (the
        epoch, if any, is left out of it: ``datacenter-gpu-manager-4-core_4.5.1-1_amd64.deb``)."""
        return f"{self.name}_{self.version.split(':', 1)[-1]}_{self.architecture}.deb"

    def control(self, installed_size_kib: int) -> str:
        """The DEBIAN/control text."""
        fields = [
            ("Package", self.name),
            ("Version", self.version),
            ("Architecture", self.architecture),
            ("Maintainer", MAINTAINER),
            ("Installed-Size", str(max(installed_size_kib, 1))),
            ("Section", self.section),
            ("Priority", "optional"),
            ("Depends", ", ".join(self.depends)),
            ("Provides", ", ".join(self.provides)),
            ("Conflicts", ", ".join(self.conflicts)),
            ("Replaces", ", ".join(self.replaces)),
        ]
        lines = [f"{key}: {value}" for key, value in fields if value]
        lines.append(f"Description: {self.summary} ({STANDIN})")
        lines += [
            f" A {STANDIN} for NVIDIA's {self.name} {self.version}.",
            " Same name, version and dependencies as the real package, but it installs no",
            " kernel module and no NVIDIA library, and nothing in it claims a GPU is present.",
        ]
        return "\n".join(lines) + "\n"


def render(template: str, **values: str) -> str:
    """Fill ``@NAME@`` placeholders of a template shipped in ``standins/templates``.

    Example: ``render("nvidia-driver-pinning.txt", BRANCH="580")``
    """
    text = resources.files("gpufleet.sandbox.standins.templates").joinpath(template).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise StandinError(f"template {template} still has {', '.join(left)} after filling it")
    return text


def recorded(name: str) -> str | None:
    """A recorded real output in ``standins/templates/recorded_<name>.txt``, if there is one."""
    path = resources.files("gpufleet.sandbox.standins.templates").joinpath(f"recorded_{name}.txt")
    return path.read_text() if path.is_file() else None
