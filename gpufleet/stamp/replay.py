"""The facts a stamp names, read again in one round trip and compared with what the plan got.

Each command runs as pyinfra ran it (``sh``, stdin closed, stderr dropped: a fact's value is
made from its stdout and exit status only); its stdout comes back base64-encoded with its exit
status, so the control node splits it into lines exactly as pyinfra's connector does and hands
them to the fact's own ``process``.

Example::

    replies = host.get_fact(StampReplay, commands=[read.command for read in stamp.facts])
    changed = differences(stamp.facts, replies)   # [] when every fact still reads the same
"""

from __future__ import annotations

import base64
import binascii
import importlib
import io
import tarfile
from collections.abc import Sequence
from typing import Any

from pyinfra.api import FactBase, StringCommand
from typing_extensions import override

from gpufleet.stamp.canonical import digest
from gpufleet.stamp.record import TRUSTED_MODULES, UNTRUSTED_FACTS, FactRead, witness_value

MISSING_COMMAND = "##PYINFRA_NOCMD##"  # pyinfra's sentinel for a fact's absent binary
_END = "gpufleet-replay: done"


def replay_script(commands: Sequence[str]) -> str:
    """One shell script that runs every command side by side (they only read), each into its
    own file in a folder made for this run (``mktemp -d``: mode 700, removed on exit), then
    prints the folder as one base64 tar line and a last line saying it finished.

    File ``N`` holds command N's stdout, ``N.rc`` its exit status.
    """
    parts = ["d=$(mktemp -d) || exit 1", "trap 'rm -rf \"$d\"' EXIT"]
    for index, command in enumerate(commands):
        parts.append(
            f'( ( {command}\n) </dev/null >"$d/{index}" 2>/dev/null; echo $? >"$d/{index}.rc" ) &'
        )
    parts.append("wait")
    parts.append('tar -C "$d" -cf - . | base64 -w0 && echo')
    parts.append(f"echo '{_END}'")
    return "\n".join(parts)


class StampReplay(FactBase):
    """
    The stdout lines and exit status of each command, in order; ``None`` when the replay did
    not finish (a lost connection, a command that killed the shell).

    .. code:: python

        host.get_fact(StampReplay, commands=["uname -r"])   # [(0, ["6.1.0-18-amd64"])]
    """

    _count = 0

    @override
    def command(self, commands: list[str]) -> StringCommand:
        self._count = len(commands)
        return StringCommand(replay_script(commands))

    @staticmethod
    @override
    def default() -> None:
        return None

    @override
    def process(self, output: list[str]) -> list[tuple[int, list[str]]] | None:
        if len(output) != 2 or output[-1] != _END:
            return None
        try:
            data = io.BytesIO(base64.b64decode(output[0], validate=True))
            with tarfile.open(fileobj=data) as archive:
                files = {
                    member.name.removeprefix("./"): archive.extractfile(member).read()  # type: ignore[union-attr]
                    for member in archive.getmembers()
                    if member.isfile()
                }
            results = []
            for index in range(self._count):
                status = int(files[f"{index}.rc"].decode().strip())
                results.append((status, split_lines(files[str(index)].decode("utf-8"))))
        except (binascii.Error, tarfile.TarError, KeyError, ValueError, UnicodeDecodeError):
            return None
        return results


def split_lines(text: str) -> list[str]:
    """Lines as pyinfra's connector reads them: split at newlines, the final one dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def differences(facts: Sequence[FactRead], replies: Any) -> list[str]:
    """What now reads differently from ``facts`` (one sentence each); ``[]`` when nothing does.

    ``replies``: the ``StampReplay`` answer for exactly these facts' commands.
    """
    if replies is None or len(replies) != len(facts):
        return ["the facts could not be read again in one round trip"]
    changed = []
    for read, (status, lines) in zip(facts, replies, strict=True):
        try:
            now = value_digest(read, status, lines)
        except Exception as exc:
            changed.append(f"{read.fact}: {type(exc).__name__}: {exc}")
            continue
        if now != value_of(read):
            changed.append(f"{read.fact} reads differently")
    return changed


def value_of(read: FactRead) -> tuple[bool, str]:
    return read.missing_command, read.value


def value_digest(read: FactRead, status: int, lines: list[str]) -> tuple[bool, str]:
    """``(missing command, digest of the value)`` as pyinfra's fact getter would make them."""
    if read.witness:
        return False, witness_value(status in read.success_codes, lines)
    if status in read.success_codes and lines == [MISSING_COMMAND]:
        return True, digest(None)
    fact = fact_class(read.fact)()
    fact.command(**read.arguments)  # some facts keep what ``process`` needs on themselves
    value: Any = fact.default()
    if status in read.success_codes and lines:
        value = fact.process(lines)
    return False, digest(value)


def fact_class(name: str) -> type[FactBase]:
    """The fact class a stamp names; only pyinfra's and gpufleet's are ever imported."""
    module, _, qualname = name.partition(":")
    if not module.startswith(TRUSTED_MODULES) and f"{module}." not in TRUSTED_MODULES:
        raise ValueError(f"fact {name} is neither pyinfra's nor gpufleet's")
    if name in UNTRUSTED_FACTS:
        raise ValueError(f"fact {name} runs its argument as a command: no stamp may name it")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, FactBase)):
        raise ValueError(f"{name} is not a pyinfra fact")
    return found
