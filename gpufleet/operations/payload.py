"""Install a directory tree shipped as one archive, versioned, with a ``current`` link."""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import tarfile
from collections.abc import Mapping
from pathlib import Path

from pyinfra import host
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from gpufleet.operations.probes import PayloadState
from gpufleet.operations.stdin import PRIVATE_TMP, encoded

SKIP = ("__pycache__", ".pytest_cache")  # never shipped (also left out of a deploy stamp)

# $1: the archive's sha256, $2: staging directory, $3: destination; stdin: the archive in
# base64. It lands in a private directory (mktemp -d: mode 700, unguessable name), is checked
# against the digest computed on the control node, and only that checked copy is extracted.
_INSTALL = (
    "set -e\n"
    + PRIVATE_TMP
    + r"""base64 -d > "$tmp/payload.tar.gz"
if ! echo "$1  $tmp/payload.tar.gz" | sha256sum -c --status; then
  echo "gpufleet: the payload archive arrived with another sha256 than $1; not installing it." >&2
  exit 1
fi
rm -rf -- "$2"
mkdir -p -- "$2"
tar -xzf "$tmp/payload.tar.gz" -C "$2" --no-same-owner
echo "$1" > "$2/.gpufleet-payload"
rm -rf -- "$3"
mv -- "$2" "$3"
"""
)


def make_archive(source: Path | Mapping[str, Path]) -> bytes:
    """A reproducible .tar.gz (sorted, zeroed times and owners, no caches).

    ``source`` is one folder (its contents at the archive's top) or folders by the name they
    get in the archive: ``make_archive({"validation": Path("validation")})``.
    """
    trees = {"": source} if isinstance(source, Path) else dict(source)
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for prefix, tree in sorted(trees.items()):
            if prefix:
                _add(tar, tree, prefix)
            for path in sorted(tree.rglob("*")):
                relative = path.relative_to(tree)
                # Pure Python only: a compiled module is built for the control node's Python
                # and CPU (tomli's mypyc build), and a node's Python skips it for the .py.
                if any(part in SKIP for part in relative.parts) or path.suffix in (".pyc", ".so"):
                    continue
                _add(tar, path, posixpath.join(prefix, relative.as_posix()))
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(path), arcname=arcname)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    info.mode = 0o755 if path.is_dir() or info.mode & 0o100 else 0o644
    if path.is_file():
        with path.open("rb") as handle:
            tar.addfile(info, handle)
    elif path.is_dir():
        tar.addfile(info)


def file_count(archive: bytes) -> int:
    """How many regular files ``archive`` (a .tar.gz of ``make_archive``) holds."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return sum(1 for member in tar.getmembers() if member.isfile())


def link_target(dest_dir: str, current_link: str) -> str:
    """What ``current_link`` holds: relative (``0.1.0``) when it sits beside ``dest_dir``, so
    the tree can be moved or mounted elsewhere whole; otherwise ``dest_dir`` itself."""
    dest_dir, current_link = dest_dir.rstrip("/"), current_link.rstrip("/")
    if posixpath.dirname(dest_dir) == posixpath.dirname(current_link):
        return posixpath.basename(dest_dir)
    return dest_dir


@operation()
def directory(archive: bytes, dest_dir: str, current_link: str | None = None):
    """
    Unpack ``archive`` (a .tar.gz) into ``dest_dir``, replacing what was there, and point
    ``current_link`` at it (relative when beside it: ``current -> 0.1.0``); nothing happens
    when the installed copy has the same digest, nothing under it changed since it was
    installed, and the link points there.

    + archive: the .tar.gz bytes (see ``make_archive``)
    + dest_dir: e.g. ``/opt/gpufleet/validation/0.1.0``
    + current_link: e.g. ``/opt/gpufleet/validation/current`` (-> ``0.1.0``)

    **Example:**

    .. code:: python

        directory(
            archive=make_archive({"validation": Path(validation.__file__).parent}),
            dest_dir="/opt/gpufleet/validation/0.1.0",
            current_link="/opt/gpufleet/validation/current",
        )
    """
    if not dest_dir.startswith("/") or dest_dir.rstrip("/") in ("", "/usr", "/etc", "/opt"):
        raise OperationError(f"directory: refusing dest_dir {dest_dir!r}")
    digest = hashlib.sha256(archive).hexdigest()
    current = host.get_fact(PayloadState, dest_dir=dest_dir, link=current_link or "")
    target = link_target(dest_dir, current_link) if current_link is not None else None
    link_ok = target is None or current["link"] == target
    intact = (
        current["digest"] == digest
        and not current.get("changed")
        and current.get("files") in (None, file_count(archive))
    )
    if intact and link_ok:
        host.noop(f"{dest_dir} is up to date")
        return
    if not intact:
        staging = f"{dest_dir}.gpufleet-new"
        yield StringCommand(
            "sh -c",
            QuoteString(_INSTALL),
            "gpufleet-payload",
            digest,
            QuoteString(staging),
            QuoteString(dest_dir),
            _stdin=encoded(archive),
        )
    if current_link is not None and target is not None and current["link"] != target:
        yield StringCommand("ln -sfn", QuoteString(target), QuoteString(current_link))
