"""Hashed pip locks per TensorFlow release: where they are, and the check every lock must pass."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LOCK_DIR = Path(__file__).parent / "locks"
# The packages gpufleet ships locks for (scripts/make-locks makes one per release of each).
LOCKED_PACKAGES = ("tensorflow[and-cuda]", "tensorflow-cpu")
MAKE_LOCKS = "scripts/make-locks"
# Locks of the tools the deploy pip-installs (uv), one per pinned requirement.
TOOL_DIR = LOCK_DIR / "tools"

_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([A-Za-z0-9._,-]+)\])?")
# One requirement of a lock once its continuation lines are joined:
# `name==version [; marker] --hash=sha256:... [--hash=sha256:...]`.
_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)"
    r"(?:\s*;\s*(?P<marker>[^-][^#]*?))?\s+(?P<hashes>(?:--hash=sha256:[0-9a-f]{64}\s*)+)"
)


class LockError(ValueError):
    """A lock that is missing, or that does not pin and hash every package."""


@dataclass(frozen=True)
class Pin:
    """One locked package: ``name==version`` (normalized name), its marker and its sha256s."""

    name: str
    version: str
    marker: str
    hashes: tuple[str, ...]


def normalize(name: str) -> str:
    """PEP 503 normalized name: ``normalize("Typing_Extensions") == "typing-extensions"``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_name(package: str, tf_version: str) -> str:
    """File name of the lock for ``package`` at ``tf_version``.

    Example: ``lock_name("tensorflow[and-cuda]", "2.21.0") == "tensorflow-and-cuda-2.21.0.txt"``
    """
    match = _NAME.fullmatch(package.strip())
    if match is None:
        raise LockError(f"{package!r} is not a package name with optional extras")
    parts = [normalize(match.group(1))]
    parts += sorted(normalize(extra) for extra in (match.group(2) or "").split(",") if extra)
    return f"{'-'.join(parts)}-{tf_version}.txt"


def lock_text(package: str, tf_version: str) -> str:
    """The shipped lock for ``package`` at ``tf_version``; ``LockError`` says how to make one."""
    path = LOCK_DIR / lock_name(package, tf_version)
    try:
        return path.read_text()
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.name for p in LOCK_DIR.glob("*.txt"))) or "none"
        raise LockError(
            f"gpufleet has no hashed pip lock for {package}=={tf_version} ({path.name}; shipped: "
            f"{shipped}), and installs nothing it cannot check. Fix: run `{MAKE_LOCKS} "
            f"--package '{package}' --tf-version {tf_version}` in a gpufleet checkout (it needs "
            "uv==0.13.8 and PyPI), commit the lock, and deploy from that checkout; or set "
            "tensorflow_package / tf_version to a locked pair."
        ) from None


def tool_lock_text(requirement: str) -> str:
    """The shipped lock of a pinned tool, e.g. ``tool_lock_text("uv==0.13.8")``."""
    name, _, version = requirement.partition("==")
    path = TOOL_DIR / f"{normalize(name.strip())}-{version.strip()}.txt"
    try:
        return path.read_text()
    except FileNotFoundError:
        raise LockError(
            f"gpufleet has no hashed pip lock for {requirement} ({path.name}). Fix: run "
            f"`{MAKE_LOCKS}` in a gpufleet checkout and commit gpufleet/matrix/locks/tools/."
        ) from None


def parse_lock(text: str) -> list[Pin]:
    """Every requirement of a lock; ``LockError`` naming the first line that is not
    ``name==version`` with at least one ``--hash=sha256:`` (pip's hash-checking mode needs both).
    """
    pins: list[Pin] = []
    for number, line in _logical_lines(text):
        match = _PIN.fullmatch(line)
        if match is None:
            raise LockError(
                f"lock line {number} is not `name==version --hash=sha256:...`: {line[:120]!r}. "
                f"Fix: regenerate the lock with {MAKE_LOCKS} (every package pinned and hashed)."
            )
        hashes = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", match.group("hashes")))
        marker = (match.group("marker") or "").strip()
        pins.append(Pin(normalize(match.group("name")), match.group("version"), marker, hashes))
    if not pins:
        raise LockError(f"the lock pins no package. Fix: regenerate it with {MAKE_LOCKS}.")
    return pins


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Requirement lines with `\\` continuations joined and comments dropped, with line numbers."""
    out: list[tuple[int, str]] = []
    current, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not current:
            start = number
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current = (current + line).strip()
        if current:
            out.append((start, current))
        current = ""
    if current.strip():
        out.append((start, current.strip()))
    return out
