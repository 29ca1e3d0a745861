"""Install a directory tree shipped as one archive, versioned, with a ``current`` link."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, QuoteString, StringCommand, operation

from gpufleet.operations.probes import PayloadState

_SKIP = ("__pycache__", ".pytest_cache")


def make_archive(source: Path) -> bytes:
    """A reproducible .tar.gz of ``source`` (sorted, zeroed times and owners, no caches)."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if any(part in _SKIP for part in relative.parts) or path.suffix == ".pyc":
                continue
            info = tar.gettarinfo(str(path), arcname=str(relative))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
            info.mode = 0o755 if path.is_dir() or info.mode & 0o100 else 0o644
            if path.is_file():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            elif path.is_dir():
                tar.addfile(info)
    return buffer.getvalue()


@operation()
def directory(archive: bytes, dest_dir: str, current_link: str | None = None):
    """
    Unpack ``archive`` (a .tar.gz) into ``dest_dir``, replacing what was there, and point
    ``current_link`` at it; nothing happens when the installed copy has the same digest.

    + archive: the .tar.gz bytes (see ``make_archive``)
    + dest_dir: e.g. ``/opt/gpufleet/validation/0.1.0``
    + current_link: e.g. ``/opt/gpufleet/validation/current``

    **Example:**

    .. code:: python

        directory(
            archive=make_archive(Path(validation.__file__).parent),
            dest_dir="/opt/gpufleet/validation/0.1.0",
            current_link="/opt/gpufleet/validation/current",
        )
    """
    if not dest_dir.startswith("/") or dest_dir.rstrip("/") in ("", "/usr", "/etc", "/opt"):
        raise OperationError(f"directory: refusing dest_dir {dest_dir!r}")
    digest = hashlib.sha256(archive).hexdigest()
    current = host.get_fact(PayloadState, dest_dir=dest_dir, link=current_link or "")
    link_ok = current_link is None or current["link"] == dest_dir
    if current["digest"] == digest and link_ok:
        host.noop(f"{dest_dir} is up to date")
        return
    if current["digest"] != digest:
        temp = host.get_temp_filename(f"payload-{digest}")
        staging = f"{dest_dir}.gpufleet-new"
        yield FileUploadCommand(io.BytesIO(archive), temp, remote_temp_filename=temp + ".part")
        yield StringCommand(
            "rm -rf",
            QuoteString(staging),
            "&& mkdir -p",
            QuoteString(staging),
            "&& tar -xzf",
            QuoteString(temp),
            "-C",
            QuoteString(staging),
            "--no-same-owner && echo",
            digest,
            ">",
            QuoteString(f"{staging}/.gpufleet-payload"),
            "&& rm -rf",
            QuoteString(dest_dir),
            "&& mv",
            QuoteString(staging),
            QuoteString(dest_dir),
            "&& rm -f",
            QuoteString(temp),
        )
    if current_link is not None and current["link"] != dest_dir:
        yield StringCommand("ln -sfn", QuoteString(dest_dir), QuoteString(current_link))
