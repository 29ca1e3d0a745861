"""Facts the gpufleet operations read to decide whether anything needs doing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from pyinfra import state
from pyinfra.api import FactBase, QuoteString, StringCommand
from pyinfra.api.host import Host
from typing_extensions import override

T = TypeVar("T")

# Facts read while planning, kept on the host object itself: nothing runs before execution, so
# while planning a fact's answer cannot change and several operations can share one round trip.
# (On the object, not in a dict keyed by it: a new host can never see another's answers.)
_PLANNING_FACTS = "_gpufleet_planning_facts"


def planning_fact(host: Host, fact: type[FactBase[T]], **kwargs: Any) -> T:
    """``host.get_fact``, read once per host while planning; always fresh while executing.

    Example: ``installed = planning_fact(host, DebPackages)``
    """
    if state.is_executing:
        return host.get_fact(fact, **kwargs)
    # pyinfra's ``host`` is a context proxy (hashing as whichever host is current): keep the
    # memo on the host it stands for.
    unwrap = getattr(type(host), "_get_module", None)
    real = unwrap(host) if unwrap else host
    memo: dict[tuple, Any] = vars(real).setdefault(_PLANNING_FACTS, {})
    key = (fact, tuple(sorted(kwargs.items())))
    if key not in memo:
        memo[key] = host.get_fact(fact, **kwargs)
    return memo[key]


class FileDigest(FactBase):
    """
    Mode, sha256 and owner (``uid:gid``) of a file, or ``None`` when it does not exist. The
    owner is ``None`` when the host did not print it.

    .. code:: python

        {"mode": "644", "sha256": "e3b0c442...", "owner": "0:0"}
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if [ -f",
            QuoteString(path),
            "]; then stat -c %a",
            QuoteString(path),
            "&& sha256sum",
            QuoteString(path),
            "&& stat -c %u:%g",
            QuoteString(path),
            "; fi",
        )

    @override
    def process(self, output: list[str]) -> dict[str, str | None] | None:
        if len(output) < 2:
            return None
        owner = output[2].strip() if len(output) > 2 else None
        return {"mode": output[0].strip(), "sha256": output[1].split()[0], "owner": owner}


ROOT_OWNER = "0:0"


def owner_differs(current: Mapping[str, str | None] | None) -> bool:
    """Whether a ``FileDigest`` says the file is not root's (uid and gid 0): another user could
    then rewrite what gpufleet wrote and runs as root (review finding 9)."""
    return current is not None and current.get("owner") not in (None, ROOT_OWNER)


# A digest for every path given: "PATH<TAB>MODE<TAB>SHA256<TAB>UID:GID" per regular file,
# nothing for a path that is not one (gpufleet's paths hold no tab or newline: the spec's path
# checks).
_DIGESTS = r"""for p; do
  if [ -f "$p" ]; then
    printf '%s\t%s\t%s\t%s\n' "$p" "$(stat -c %a -- "$p")" \
      "$(sha256sum < "$p" | cut -d' ' -f1)" "$(stat -c %u:%g -- "$p")"
  fi
done
"""


class FileDigests(FactBase):
    """
    ``FileDigest`` of many paths in one round trip: ``{path: {"mode", "sha256"} or None}``.

    .. code:: python

        {"/etc/gpufleet/driver-branch": {"mode": "644", "sha256": "9f2c..."}, "/x": None}
    """

    default = dict

    @override
    def command(self, paths: tuple[str, ...]) -> StringCommand:
        return StringCommand(
            "sh -c", QuoteString(_DIGESTS), "gpufleet-digests", *[QuoteString(p) for p in paths]
        )

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, str | None]]:
        found: dict[str, dict[str, str | None]] = {}
        for line in output:
            path, _, rest = line.rstrip("\n").partition("\t")
            mode, _, rest = rest.partition("\t")
            digest, _, owner = rest.partition("\t")
            if path and mode and len(digest) == 64:
                found[path] = {"mode": mode, "sha256": digest, "owner": owner or None}
        return found


# Paths whose digest hosts of this run were asked for (and by which hosts), by pyinfra state:
# while planning, the next host reads them all in one round trip (FileDigests), not one each.
_SEEN: WeakKeyDictionary[Any, dict[str, set[str]]] = WeakKeyDictionary()


def file_digest(host: Host, path: str) -> dict[str, str | None] | None:
    """``host.get_fact(FileDigest, path=path)``; while planning, the first miss on a host reads
    every path the hosts planned before it asked for, in one round trip (FileDigests)."""
    if state.is_executing:
        return host.get_fact(FileDigest, path=path)
    unwrap = getattr(type(host), "_get_module", None)
    real = unwrap(host) if unwrap else host
    memo: dict[str, dict[str, str | None] | None] = vars(real).setdefault(_DIGEST_MEMO, {})
    if path not in memo:
        seen = _SEEN.setdefault(_state_key(), {})
        # Paths other hosts asked for (a host asking again for its own would gain nothing).
        batch = [p for p, by in seen.items() if p not in memo and p != path and by - {real.name}]
        if batch:
            found = host.get_fact(FileDigests, paths=tuple([path, *batch]))
            memo.update({p: found.get(p) for p in [path, *batch]})
        else:
            memo[path] = host.get_fact(FileDigest, path=path)
        seen.setdefault(path, set()).add(real.name)
    return memo[path]


_DIGEST_MEMO = "_gpufleet_file_digests"


def _state_key() -> Any:
    unwrap = getattr(type(state), "_get_module", None)
    return unwrap(state) if unwrap else state


class PathExists(FactBase):
    """
    Whether a path exists, following symlinks (a venv's ``bin/python`` is one, which pyinfra's
    ``files.File`` reports as "not a file").

    .. code:: python

        True
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand("if [ -e", QuoteString(path), "]; then echo yes; fi")

    @staticmethod
    @override
    def default() -> bool:
        return False

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[0].strip() == "yes"


class PipVersion(FactBase):
    """
    The version of an environment's pip (``python -m pip --version``), or ``None`` when that
    Python or its pip is missing.

    .. code:: python

        "20.0.2"
    """

    @override
    def command(self, python: str) -> StringCommand:
        return StringCommand(
            "if [ -x",
            QuoteString(python),
            "]; then",
            QuoteString(python),
            "-m pip --version 2>/dev/null || true; fi",
        )

    @override
    def process(self, output: list[str]) -> str | None:
        words = output[0].split() if output else []
        if len(words) > 1 and words[0] == "pip" and words[1][:1].isdigit():
            return words[1]
        return None


class KeyringFingerprints(FactBase):
    """
    Primary-key fingerprints (upper case) in an OpenPGP keyring file; empty when the file or
    ``gpg`` is missing.

    .. code:: python

        ["EB693B3035CD5710E231E123A4B469963BF863CC"]
    """

    default = list

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if [ -f",
            QuoteString(path),
            "] && command -v gpg >/dev/null 2>&1; then",
            'tmp=$(mktemp -d) && gpg --batch --homedir "$tmp" --with-colons --show-keys',
            QuoteString(path),
            '2>/dev/null | awk -F: \'$1=="pub"{want=1} $1=="fpr"&&want{print $10; want=0}\';',
            'rm -rf "$tmp"; fi',
        )

    def stamp_witness(self, path: str) -> StringCommand:
        """What a deploy stamp replays instead (gpufleet.stamp): the keyring's sha256, and the
        size, change time and inode of the ``gpg`` it would be read with. A fingerprint is a
        digest of the key's own bytes (RFC 4880, 12.2), so while the file and ``gpg`` stay
        the same, so does the fact; ``gpg`` with a home folder of its own costs five times as
        much of a host's CPU."""
        return StringCommand(
            "if [ -f",
            QuoteString(path),
            "] && g=$(command -v gpg); then sha256sum <",
            QuoteString(path),
            '&& TZ=UTC0 stat -L -c "%s %z %i" "$g"; fi',
        )

    @override
    def process(self, output: list[str]) -> list[str]:
        return [line.strip().upper() for line in output if line.strip()]


class HeldPackages(FactBase):
    """
    Packages on hold (``apt-mark showhold``).

    .. code:: python

        ["libcudnn9-cuda-12", "libnccl2"]
    """

    default = list

    @override
    def requires_command(self) -> str:
        return "apt-mark"

    @override
    def command(self) -> str:
        return "apt-mark showhold"

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())


class NvidiaModuleState(FactBase):
    """
    The loaded NVIDIA module's version, the installed one's (``modinfo``) and whether nouveau
    is loaded.

    .. code:: python

        {"loaded": "570.195.03", "installed": "580.105.08", "nouveau": False}
    """

    @override
    def command(self) -> str:
        return (
            "echo loaded=$(cat /sys/module/nvidia/version 2>/dev/null); "
            "echo installed=$(modinfo -F version nvidia 2>/dev/null); "
            "if [ -d /sys/module/nouveau ]; then echo nouveau=yes; else echo nouveau=no; fi"
        )

    @staticmethod
    @override
    def default() -> dict[str, str | bool | None]:
        return {"loaded": None, "installed": None, "nouveau": False}

    @override
    def process(self, output: list[str]) -> dict[str, str | bool | None]:
        values = dict(line.strip().partition("=")[::2] for line in output if "=" in line)
        return {
            "loaded": values.get("loaded") or None,
            "installed": values.get("installed") or None,
            "nouveau": values.get("nouveau") == "yes",
        }


class PayloadState(FactBase):
    """
    The digest recorded in an installed payload directory, where its ``current`` link points,
    the first file under it changed since the digest was recorded (``None``: none), and how
    many files it holds (``None`` when not installed).

    Extraction writes the marker last, so every file of an untouched tree is older than it; an
    edit, a chmod, a same-size rewrite with its times put back or a replaced file gives a file
    whose change time is newer, and an added or deleted one another count (review finding
    10). The caches Python may write there (``__pycache__``) are left out.

    .. code:: python

        {"digest": "9f2c...", "link": "0.1.0", "changed": None, "files": 212}
    """

    @override
    def command(self, dest_dir: str, link: str) -> StringCommand:
        marker = QuoteString(f"{dest_dir}/.gpufleet-payload")
        files = [
            "find",
            QuoteString(dest_dir),
            "-mindepth 1 \\( -name __pycache__ -o -name .pytest_cache \\) -prune",
            "-o -type f ! -path",
            marker,
        ]
        return StringCommand(
            "echo digest=$(cat",
            marker,
            "2>/dev/null); echo link=$(readlink",
            QuoteString(link),
            "2>/dev/null); if [ -f",
            marker,
            "]; then echo changed=$(",
            *files,
            "-cnewer",
            marker,
            "-print -quit 2>/dev/null); echo files=$(",
            *files,
            "-print 2>/dev/null | wc -l); fi",
        )

    @staticmethod
    @override
    def default() -> dict[str, str | int | None]:
        return {"digest": None, "link": None, "changed": None, "files": None}

    @override
    def process(self, output: list[str]) -> dict[str, str | int | None]:
        values = dict(line.strip().partition("=")[::2] for line in output if "=" in line)
        count = values.get("files", "").strip()
        return {
            "digest": values.get("digest") or None,
            "link": values.get("link") or None,
            "changed": values.get("changed") or None,
            "files": int(count) if count.isdigit() else None,
        }
