"""Write whole files from content in one round trip, keeping secret content out of all output."""

from __future__ import annotations

import hashlib
import io
import posixpath

from pyinfra import host
from pyinfra.api import (
    FileUploadCommand,
    HiddenValue,
    OperationError,
    QuoteString,
    StringCommand,
    operation,
)

from gpufleet.operations.probes import FileDigest


@operation()
def content(path: str, text: str | HiddenValue, mode: str = "644", present: bool = True):
    """
    Ensure a root-owned file holds exactly ``text``.

    + path: absolute path of the file
    + text: the content; a ``HiddenValue`` is written without ever appearing in output
    + mode: octal permission bits, e.g. ``"600"``
    + present: ``False`` removes the file

    **Example:**

    .. code:: python

        content(
            name="apt proxy",
            path="/etc/apt/apt.conf.d/95gpufleet-proxy",
            text=HiddenValue('Acquire::http::Proxy "http://u:pw@proxy:3128";\\n'),
            mode="600",
        )
    """
    if not path.startswith("/"):
        raise OperationError(f"content: path {path!r} must be absolute")
    mode = mode.lstrip("0") or "0"
    current = host.get_fact(FileDigest, path=path)
    if not present:
        if current is None:
            host.noop(f"file {path} is already absent")
            return
        yield StringCommand("rm -f", QuoteString(path))
        return

    raw = text.unmask() if isinstance(text, HiddenValue) else text
    wanted = hashlib.sha256(raw.encode()).hexdigest()
    if current is not None and current["sha256"] == wanted:
        if current["mode"] != mode:
            yield StringCommand("chmod", mode, QuoteString(path))
        else:
            host.noop(f"file {path} is up to date")
        return

    yield StringCommand("mkdir -p", QuoteString(posixpath.dirname(path)))
    if isinstance(text, HiddenValue):
        # printf runs in the remote shell: the secret travels in the command, which pyinfra
        # masks in every log line (HiddenValue), and never lands in a temp file.
        yield StringCommand(
            "umask 077 && printf '%s'",
            QuoteString(HiddenValue(raw)),
            ">",
            QuoteString(path),
        )
    else:
        yield FileUploadCommand(
            io.StringIO(raw),
            path,
            remote_temp_filename=host.get_temp_filename(path),
        )
    yield StringCommand("chmod", mode, QuoteString(path))
