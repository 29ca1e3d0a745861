"""The merged commands of a replay (gpufleet.stamp.batch): file digests and systemd units.

Each kind has a ``*_key`` (which reads it answers: only those whose command is exactly what
the fact sends), a ``*_script`` (one command for all of them) and a ``*_replies`` (what each
read's own command would have printed, or None for any output not of the expected shape).

Example::

    key = unit_key(read)                       # ("SubState", "nvidia-persistenced.service")
    script = units_script([key])               # one systemctl show
    replies = unit_replies([key], (0, lines))  # {key: (0, ["Id=...", "SubState=running"])}
"""

from __future__ import annotations

import shlex
from collections.abc import Hashable
from typing import Any

from pyinfra.api import StringCommand
from pyinfra.facts.systemd import SystemdEnabled, SystemdStatus

from gpufleet.operations.probes import FileDigest
from gpufleet.stamp.record import FactRead, fact_name, shell_text
from gpufleet.stamp.replay import MISSING_COMMAND

Reply = tuple[int, list[str]]
_MARK = "##gpufleet-batch"
_FILE_DIGEST = fact_name(FileDigest)
_UNIT_FACTS = {fact_name(cls): cls for cls in (SystemdStatus, SystemdEnabled)}
_UNIT_DEFAULTS = {"user_mode": False, "machine": None, "user_name": None}


# --- FileDigest: the mode, sha256 and owner of one file -------------------------------------


def digest_key(read: FactRead) -> Hashable | None:
    """The path of a ``FileDigest`` read whose command is exactly what the fact sends for it."""
    path = read.arguments.get("path")
    if read.fact != _FILE_DIGEST or read.witness or not isinstance(path, str):
        return None
    if read.success_codes != (0,) or set(read.arguments) != {"path"}:
        return None
    command, _secret = shell_text(FileDigest().command(path=path))
    return path if command == read.command else None


def digests_script(paths: list[Any]) -> str:
    """Mode, owner and digest of every regular file among ``paths``: the paths that are files,
    then ``stat`` over them all, then ``sha256sum``, each part ending in a mark with its
    status."""
    quoted = " ".join(shlex.quote(path) for path in paths)
    return "\n".join(
        [
            "set --",
            f'for p in {quoted}; do if [ -f "$p" ]; then set -- "$@" "$p"; fi; done',
            'for p; do echo "$p"; done',
            f"echo '{_MARK}'",
            "if [ $# -gt 0 ]; then stat -c '%a %u:%g %n' \"$@\"; fi",
            f'echo "{_MARK} $?"',
            'if [ $# -gt 0 ]; then sha256sum "$@"; fi',
            f'echo "{_MARK} $?"',
        ]
    )


def digest_replies(paths: list[Any], reply: Reply) -> dict[Any, Reply] | None:
    """What each path's own ``FileDigest`` command would have printed, or None."""
    status, lines = reply
    try:
        first = lines.index(_MARK)
    except ValueError:
        return None
    files, rest = lines[:first], lines[first + 1 :]
    count = len(files)
    # rest: a mode line per file, stat's mark, a digest line per file, sha256sum's mark
    if status != 0 or len(rest) != 2 * count + 2:
        return None
    modes, hashes = rest[:count], rest[count + 1 : -1]
    if rest[count] != f"{_MARK} 0" or rest[-1] != f"{_MARK} 0":
        return None
    if len(set(files)) != len(files) or not set(files) <= set(paths):
        return None
    found: dict[Any, Reply] = {path: (0, []) for path in paths}
    for path, mode_line, hash_line in zip(files, modes, hashes, strict=True):
        mode, _, owned = mode_line.partition(" ")
        owner, _, named = owned.partition(" ")
        digest, _, hashed = hash_line.partition("  ")
        if named != path or hashed != path or not mode or not owner or not digest:
            return None  # a line of another file (or an escaped name): never hand it on
        found[path] = (0, [mode, hash_line, owner])
    return found


# --- SystemdStatus / SystemdEnabled: one unit's state ---------------------------------------


def unit_key(read: FactRead) -> Hashable | None:
    """``(property, units)`` of a system-manager ``SystemdStatus`` or ``SystemdEnabled`` read
    of named units whose command is exactly what pyinfra sends for it."""
    cls = _UNIT_FACTS.get(read.fact)
    units = read.arguments.get("services")
    if isinstance(units, str):
        units = [units]
    if cls is None or read.witness or read.success_codes != (0,) or not isinstance(units, list):
        return None
    if not units or not all(isinstance(unit, str) and unit for unit in units):
        return None
    if {k: v for k, v in read.arguments.items() if k != "services"} != _UNIT_DEFAULTS:
        return None
    sent = _guarded(cls().command(services=read.arguments["services"]))
    return (cls.state_key, tuple(units)) if read.command == sent else None


def units_script(keys: list[Any]) -> str:
    """One ``systemctl show`` of every unit, with every property the reads ask for, guarded as
    pyinfra guards each read (the sentinel when there is no systemctl)."""
    units = _units(keys)
    properties = ["Id", *dict.fromkeys(prop for prop, _ in keys)]
    show = " ".join(
        ["systemctl show --all", *(f"--property {p}" for p in properties), *map(shlex.quote, units)]
    )
    return _guarded(StringCommand(show))


def unit_replies(keys: list[Any], reply: Reply) -> dict[Any, Reply] | None:
    """Each read's lines: its units' blocks (systemctl prints one per unit, in the order named,
    a blank line between two), with only ``Id`` and the read's property, in the order
    systemctl prints them (its own, whatever the order of ``--property``); None for output of
    any other shape."""
    status, lines = reply
    if status != 0:
        return None
    if lines == [MISSING_COMMAND]:
        return {key: (0, [MISSING_COMMAND]) for key in keys}
    units = _units(keys)
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line:
            blocks[-1].append(line)
        else:
            blocks.append([])
    wanted = {"Id", *(prop for prop, _ in keys)}
    if len(blocks) != len(units) or any(
        not block or not block[0].startswith("Id=") or len(block) != len(wanted)
        or {line.partition("=")[0] for line in block} != wanted
        for block in blocks
    ):  # fmt: skip
        return None
    by_unit = dict(zip(units, blocks, strict=True))
    replies: dict[Any, Reply] = {}
    for prop, named in keys:
        shown: list[str] = []
        for index, unit in enumerate(named):
            shown += [""] if index else []
            shown += [line for line in by_unit[unit] if line.partition("=")[0] in ("Id", prop)]
        replies[(prop, named)] = (0, shown)
    return replies


def _units(keys: list[Any]) -> list[str]:
    return list(dict.fromkeys(unit for _, named in keys for unit in named))


def _guarded(command: StringCommand) -> str:
    """``command`` as pyinfra's fact getter wraps a fact that requires systemctl."""
    return StringCommand(
        "if command -v systemctl >/dev/null 2>&1; then (", command, ");",
        "else echo", f"'{MISSING_COMMAND}';", "fi",
    ).get_raw_value()  # fmt: skip
