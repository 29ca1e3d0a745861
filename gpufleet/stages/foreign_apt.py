"""The host's apt sources and pins as the probe read them: which entries, which of NVIDIA's.

Example::

    sources = apt_sources(plan.state.config.apt_sources)
    sources[0].uris    # ("http://deb.debian.org/debian",)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpufleet.stages.host_config import FileLine

# Package names that are NVIDIA's stack (driver, CUDA, cuDNN, NCCL, DCGM): a pin naming one of
# them changes what gpufleet installs and locks.
NVIDIA_PACKAGE = re.compile(
    r"nvidia|cuda|cudnn|nccl|datacenter-gpu-manager|libxnvctrl|nsight", re.IGNORECASE
)
# apt reads preferences.d files with no extension or ".pref", named with these characters only
# (apt_preferences(5)); it ignores every other file there.
_PREF_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class SourceEntry:
    """One enabled source: the file it is in and its URIs (a one-line entry has one)."""

    path: str
    uris: tuple[str, ...]


@dataclass(frozen=True)
class PinStanza:
    """One preferences record: its file, its Package patterns and its Pin line."""

    path: str
    packages: tuple[str, ...]
    pin: str
    priority: str


def _by_file(lines: Iterable[FileLine]) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for line in lines:
        files.setdefault(line.path, []).append(line.text)
    return files


def _stanzas(texts: Sequence[str]) -> list[dict[str, str]]:
    """deb822 paragraphs (sources.list(5), apt_preferences(5)): fields by lower-case name."""
    found: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for text in [*texts, ""]:
        if not text.strip():
            if current:
                found.append(current)
            current = {}
            continue
        name, colon, value = text.partition(":")
        if colon:
            current[name.strip().lower()] = value.strip()
    return found


def _one_line_uri(text: str) -> str | None:
    """The URI of a one-line ``deb [options] URI suite ...`` entry (sources.list(5))."""
    words = text.split()
    if not words or words[0] not in ("deb", "deb-src"):
        return None
    rest = words[1:]
    if rest and rest[0].startswith("["):
        while rest and not rest[0].endswith("]"):
            rest = rest[1:]
        rest = rest[1:]
    return rest[0] if rest else None


def apt_sources(lines: Iterable[FileLine]) -> list[SourceEntry]:
    """Every enabled source entry, file by file in the order the probe listed them."""
    entries = []
    for path, texts in _by_file(lines).items():
        if path.endswith(".sources"):
            for stanza in _stanzas(texts):
                if stanza.get("enabled", "yes").lower() == "no":
                    continue
                uris = tuple(stanza.get("uris", "").split())
                if uris:
                    entries.append(SourceEntry(path, uris))
            continue
        for text in texts:
            uri = _one_line_uri(text)
            if uri:
                entries.append(SourceEntry(path, (uri,)))
    return entries


def apt_pins(lines: Iterable[FileLine]) -> list[PinStanza]:
    """Every preferences record apt reads (files it ignores left out)."""
    found = []
    for path, texts in _by_file(lines).items():
        name = path.rsplit("/", 1)[-1]
        if path != "/etc/apt/preferences" and not (
            _PREF_NAME.fullmatch(name) and ("." not in name or name.endswith(".pref"))
        ):
            continue
        for stanza in _stanzas(texts):
            packages = tuple(stanza.get("package", "").split())
            if packages:
                pin = stanza.get("pin", "")
                found.append(PinStanza(path, packages, pin, stanza.get("pin-priority", "")))
    return found


def names_nvidia(pin: PinStanza) -> bool:
    """Whether a record bears on NVIDIA's packages: it names them, or pins NVIDIA's origin."""
    return any(NVIDIA_PACKAGE.search(p) for p in pin.packages) or "nvidia" in pin.pin.lower()


def without_login(uri: str) -> str:
    """``scheme://host/path`` without ``user:password@`` and without a trailing slash."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri.rstrip("/")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}".rstrip("/")


def under(uri: str, bases: Iterable[str]) -> bool:
    """Whether ``uri`` is one of ``bases`` or below one (logins and trailing slashes aside;
    the scheme of http and https counted the same)."""
    plain = re.sub(r"^https?://", "//", without_login(uri))
    for base in bases:
        root = re.sub(r"^https?://", "//", without_login(base))
        if plain == root or plain.startswith(root + "/"):
            return True
    return False
