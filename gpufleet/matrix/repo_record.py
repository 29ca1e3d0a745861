"""NVIDIA's CUDA apt repositories as recorded from public sources (record/nvidia_repos.json).

The record is read, never written, by the code: the resolver's names are checked against it
(``spec_status``), ``gpufleet matrix`` warns about what it does not settle, and the sandbox's
stand-in repository is built from it. Sources: ``gpufleet/matrix/record/SOURCES.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import lru_cache
from importlib import resources
from typing import Any

RECORD_FILE = "nvidia_repos.json"
# Control fields a stanza may record, in the order dpkg writes them.
RELATION_FIELDS = ("Depends", "Provides", "Conflicts", "Replaces", "Breaks")


class RecordError(ValueError):
    """The record file is malformed; the message names the stanza and the fix."""


@dataclass(frozen=True)
class RecordedPackage:
    """One package of one repository (``"ubuntu2204/x86_64"``) as the record has it.

    ``unverified``: why no public record settles the name there (None: a source does);
    ``version_unverified``: why the version is not settled although the name is.

    Example: ``record().find("ubuntu2204/x86_64", "nvidia-fabricmanager")[0].provides``
    """

    package: str
    version: str
    repository: str
    fields: tuple[tuple[str, str], ...]
    branch: int | None
    sources: tuple[str, ...]
    unverified: str | None
    version_unverified: str | None
    notes: str

    def field(self, name: str) -> str:
        """A relation field's raw text (``"Depends"``), or ``""``."""
        return dict(self.fields).get(name, "")

    @property
    def provides(self) -> tuple[str, ...]:
        """Virtual names this package provides (versions in parentheses dropped)."""
        return tuple(p.split("(")[0].strip() for p in self.field("Provides").split(",") if p)


@dataclass(frozen=True)
class Absent:
    """A name the record knows is no real package in a repository, and why."""

    package: str
    why: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class SpecStatus:
    """What the record says about one apt spec in one repository.

    ``kind``: ``verified``, ``unverified`` (recorded, not settled by a source), ``virtual``
    (only provided by other packages: installable by apt, but no version of its own to pin,
    follow or hold), ``absent`` (known not to exist) or ``missing`` (not in the record).
    """

    spec: str
    repository: str
    kind: str
    why: str = ""


def _matches(repository: str, patterns: Any) -> bool:
    return any(fnmatch(repository, p) for p in patterns)


def _for_repo(value: Any, repository: str) -> Any:
    """A field that is either one value or a ``{glob: value}`` map, for one repository."""
    if not isinstance(value, dict):
        return value
    for pattern, item in value.items():
        if fnmatch(repository, pattern):
            return item
    return None


class RepoRecord:
    """The parsed record: ``packages(repo)``, ``find(repo, name)``, ``status(repo, spec)``."""

    def __init__(self, data: dict[str, Any]):
        self.repositories: tuple[str, ...] = tuple(data["repositories"])
        self._by_repo: dict[str, list[RecordedPackage]] = {r: [] for r in self.repositories}
        self._absent: dict[tuple[str, str], Absent] = {}
        for index, stanza in enumerate(data["packages"]):
            self._add(index, stanza)
        for item in data.get("absent", []):
            for repo in self.repositories:
                if _matches(repo, item["not_in"]):
                    self._absent[(repo, item["Package"])] = Absent(
                        item["Package"], item["why"], tuple(item["source"])
                    )

    def _add(self, index: int, stanza: dict[str, Any]) -> None:
        name = stanza.get("Package")
        if not name or "Version" not in stanza or not stanza.get("in") or not stanza.get("source"):
            raise RecordError(
                f"{RECORD_FILE} stanza {index} ({name!r}) needs Package, Version, in and source."
                " Fix: add the missing field with its source in SOURCES.md."
            )
        for repo in self.repositories:
            if not _matches(repo, stanza["in"]):
                continue
            version = _for_repo(stanza["Version"], repo)
            if not version:
                raise RecordError(
                    f"{RECORD_FILE}: {name} has no Version for {repo}. Fix: add a pattern for it."
                )
            self._by_repo[repo].append(
                RecordedPackage(
                    package=name,
                    version=version,
                    repository=repo,
                    fields=tuple((f, stanza[f]) for f in RELATION_FIELDS if stanza.get(f)),
                    branch=stanza.get("branch"),
                    sources=tuple(stanza["source"]),
                    unverified=_for_repo(stanza.get("unverified"), repo),
                    version_unverified=_for_repo(stanza.get("version_unverified"), repo),
                    notes=stanza.get("notes", ""),
                )
            )

    def packages(self, repository: str) -> list[RecordedPackage]:
        """Every recorded package of ``"<distro>/<arch>"``; RecordError for an unknown one."""
        if repository not in self._by_repo:
            raise RecordError(
                f"{repository!r} is not a recorded repository (recorded: "
                f"{', '.join(self.repositories)}). Fix: record it in {RECORD_FILE}."
            )
        return self._by_repo[repository]

    def find(self, repository: str, name: str, branch: int | None = None) -> list[RecordedPackage]:
        """The real packages called ``name`` (each recorded version); with ``branch``, only
        those of that driver branch (and those of no branch, such as CUDA or DCGM)."""
        return [
            p
            for p in self.packages(repository)
            if p.package == name and (branch is None or p.branch in (None, branch))
        ]

    def providers(self, repository: str, name: str) -> list[RecordedPackage]:
        """The packages that provide ``name`` as a virtual name."""
        return [p for p in self.packages(repository) if name in p.provides]

    def absent(self, repository: str, name: str) -> Absent | None:
        """Why ``name`` is known not to be a real package there, if the record says so."""
        return self._absent.get((repository, name))

    def status(self, repository: str, spec: str, branch: int | None = None) -> SpecStatus:
        """What the record says about ``name`` or ``name=version`` in ``repository`` (with
        ``branch``: as a package of that driver branch).

        Example: ``record().status("ubuntu2204/x86_64", "nvidia-fabricmanager-580").kind
        == "virtual"``
        """
        name, _, version = spec.partition("=")
        real = self.find(repository, name, branch)
        if version:
            real = [p for p in real if p.version == version]
        if real:
            settled = [p for p in real if p.unverified is None]
            if version:
                settled = [p for p in settled if p.version_unverified is None]
            if settled:
                return SpecStatus(spec, repository, "verified")
            first = real[0]
            return SpecStatus(
                spec, repository, "unverified", first.unverified or first.version_unverified or ""
            )
        gone = self.absent(repository, name)
        if self.providers(repository, name):
            why = (
                gone.why
                if gone
                else "provided by "
                + ", ".join(f"{p.package} {p.version}" for p in self.providers(repository, name))
            )
            return SpecStatus(spec, repository, "virtual", why)
        if gone:
            return SpecStatus(spec, repository, "absent", gone.why)
        if self.find(repository, name):
            versions = ", ".join(p.version for p in self.find(repository, name))
            where = f" (none of branch {branch})" if branch else ""
            return SpecStatus(spec, repository, "missing", f"recorded at {versions} only{where}")
        return SpecStatus(spec, repository, "missing", "not in the record")


@lru_cache(maxsize=1)
def record() -> RepoRecord:
    """The record shipped with gpufleet, parsed once."""
    text = resources.files("gpufleet.matrix.record").joinpath(RECORD_FILE).read_text()
    return RepoRecord(json.loads(text))


_KINDS = {
    "unverified": "unverified",
    "missing": "not in the record",
    "virtual": "recorded as a virtual name only",
    "absent": "recorded as absent",
}


def spec_warnings(distro: str, arch: str, specs: list[str], branch: int | None = None) -> list[str]:
    """A warning for each apt spec (of driver ``branch``) the record does not settle in
    ``distro/arch``, saying what to check before a deploy.

    Example: ``spec_warnings("ubuntu2204", "x86_64", ["libfoo"], 580)``
    """
    repo = repository(distro, arch)
    if repo not in record().repositories:
        return [f"no record of NVIDIA's {repo} repository: no package name is verified there"]
    warnings = []
    for spec in specs:
        status = record().status(repo, spec, branch)
        if status.kind != "verified":
            warnings.append(
                f"apt package {spec} in NVIDIA's {repo} repository: {_KINDS[status.kind]} "
                f"({status.why}; gpufleet/matrix/record/SOURCES.md). Check `apt-cache policy "
                f"{spec.split('=', 1)[0]}` on one host."
            )
    return warnings


def repository(distro: str, arch: str) -> str:
    """The record's name of a repository: ``repository("ubuntu2204", "sbsa")`` is
    ``"ubuntu2204/sbsa"``."""
    return f"{distro}/{arch}"
