"""Stamps on the control node: one JSON file per host, in a folder only its owner can read.

The folder is ``$GPUFLEET_STAMP_DIR``, else ``$XDG_STATE_HOME/gpufleet/deploy-stamps``, else
``~/.local/state/gpufleet/deploy-stamps``. A stamp holds digests and fact commands, never a
secret (commands that carry one are never stamped); a file that is unreadable, of another
format or not its owner's alone is ignored, so the host is planned in full.

A stamp's commands run as root on its host, so every file here carries an HMAC under a key
kept outside the folder (``$GPUFLEET_STAMP_KEY``, else ``$XDG_CONFIG_HOME/gpufleet/stamp-key``,
else ``~/.config/gpufleet/stamp-key``; made on first use, mode 600): a stamp folder restored
from a CI cache, shared, or written by anyone without that key is ignored (review finding 11).

Example::

    save(Stamp(host="gpu-a", inputs="9f2c...", executor="77ab...", facts=[...]))
    load("gpu-a")   # the same Stamp, or None
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.stamp.record import TRUSTED_MODULES, UNTRUSTED_FACTS, FactRead

FORMAT = 2  # 2: every file signed (an HMAC under the stamp key)
KEY_ENV = "GPUFLEET_STAMP_KEY"


@dataclass(frozen=True)
class Stamp:
    """What one empty plan of ``host`` read: the inputs' digest, the connector arguments' digest,
    the facts in the order read, and local files (path -> sha256, None when absent)."""

    host: str
    inputs: str
    executor: str
    facts: list[FactRead]
    local_files: dict[str, str | None] = field(default_factory=dict)


def stamp_dir() -> Path:
    explicit = os.environ.get("GPUFLEET_STAMP_DIR")
    if explicit:
        return Path(explicit)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "gpufleet" / "deploy-stamps"


def key_path() -> Path:
    explicit = os.environ.get(KEY_ENV)
    if explicit:
        return Path(explicit)
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "gpufleet" / "stamp-key"


def _key(create: bool) -> bytes | None:
    """The stamp key (this user's alone), made when ``create`` and there is none; None when
    there is none, or it is not this user's alone."""
    path = key_path()
    try:
        if _private(path, stat.S_ISREG):
            return path.read_bytes().strip() or None
        return None
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another run made it first
        return _key(create=False)
    with os.fdopen(handle, "w") as out:
        out.write(secrets.token_hex(32) + "\n")
    return _key(create=False)


def _mac(key: bytes, document: object) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def stamp_path(host: str) -> Path:
    """One file per inventory name; the name is hashed, so any name makes a safe file name."""
    return stamp_dir() / f"{hashlib.sha256(host.encode()).hexdigest()[:32]}.json"


def save(stamp: Stamp) -> Path:
    """Write ``stamp`` atomically, mode 600 in a mode 700 folder."""
    return write_private(stamp_path(stamp.host), {"format": FORMAT, **asdict(stamp)})


def write_private(path: Path, document: object) -> Path:
    """Write ``document`` as JSON to ``path`` in the stamp folder, atomically, mode 600 in a
    mode 700 folder, signed with the stamp key."""
    key = _key(create=True)
    if key is None:
        raise OSError(f"the stamp key {key_path()} is not this user's alone (mode 600)")
    signed = {"document": document, "mac": _mac(key, document)}
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(handle, "w") as out:
        json.dump(signed, out, sort_keys=True)
    os.replace(temporary, path)
    return path


def read_private(path: Path) -> object | None:
    """The JSON document at ``path``, or None when absent, unreadable, not this user's alone
    (in a folder that is not either), or not signed with this user's stamp key."""
    try:
        if not (_private(path.parent, stat.S_ISDIR) and _private(path, stat.S_ISREG)):
            return None
        signed = json.loads(path.read_text())
        key = _key(create=False)
        if key is None or not isinstance(signed, dict) or not isinstance(signed.get("mac"), str):
            return None
        document = signed.get("document")
        return document if hmac.compare_digest(signed["mac"], _mac(key, document)) else None
    except (OSError, ValueError):
        return None


def load(host: str) -> Stamp | None:
    """The stamp of ``host``, or None (none yet, unreadable, or not safe to trust)."""
    document: Any = read_private(stamp_path(host))
    try:
        if document is None or document.get("format") != FORMAT or document.get("host") != host:
            return None
        facts = [
            FactRead(
                fact=str(read["fact"]),
                command=str(read["command"]),
                success_codes=tuple(int(code) for code in read["success_codes"]),
                value=str(read["value"]),
                missing_command=bool(read["missing_command"]),
                arguments=dict(read["arguments"]),
                witness=bool(read["witness"]),
            )
            for read in document["facts"]
        ]
        if any(r.fact in UNTRUSTED_FACTS or not r.fact.startswith(TRUSTED_MODULES) for r in facts):
            return None  # its commands are replayed before anything else: never such a one
        local_files = {
            str(k): (None if v is None else str(v)) for k, v in document["local_files"].items()
        }
        return Stamp(host, str(document["inputs"]), str(document["executor"]), facts, local_files)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _private(path: Path, kind: Callable[[int], bool]) -> bool:
    """``path`` is of that kind (not a link), its owner is this user and no one else has any
    access: a stamp names commands that run on a host, so no one else may write one."""
    info = path.lstat()
    return kind(info.st_mode) and not info.st_mode & 0o077 and info.st_uid == os.getuid()


def forget(host: str) -> None:
    """Remove the stamp of ``host`` (a run that planned changes there)."""
    stamp_path(host).unlink(missing_ok=True)
