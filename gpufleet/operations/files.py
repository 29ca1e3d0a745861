"""Write whole files from content in one round trip, the content on stdin, never in output."""

from __future__ import annotations

import hashlib
import re

from pyinfra import host
from pyinfra.api import (
    HiddenValue,
    OperationError,
    QuoteString,
    StringCommand,
    operation,
)

from gpufleet.operations.probes import file_digest
from gpufleet.operations.stdin import encoded

# $1: the file, $2: its mode; stdin: the content in base64. mktemp makes the file mode 600.
_WRITE = r"""set -e
mkdir -p -- "$(dirname -- "$1")"
tmp=$(mktemp -- "$1.gpufleet-XXXXXXXX")
trap 'rm -f -- "$tmp"' EXIT
base64 -d > "$tmp"
chmod "$2" -- "$tmp"
mv -f -- "$tmp" "$1"
trap - EXIT
"""


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
    if not re.fullmatch(r"[0-7]{1,4}", mode):
        raise OperationError(f"content: mode {mode!r} is not octal permission bits")
    mode = mode.lstrip("0") or "0"
    current = file_digest(host, path)
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

    # The content travels on stdin (base64) into a new mode-600 file beside the target, which
    # gets its mode and then replaces the target in one rename: no temp file in /tmp that a
    # local user could pre-create, no secret in any command line, no moment at a wider mode.
    yield write_command(path, raw, mode)


def write_command(path: str, text: str, mode: str) -> StringCommand:
    """The command writing ``text`` to ``path`` at ``mode`` (octal) as ``content`` does: the
    text on stdin, a new file beside the target renamed over it."""
    return StringCommand(
        "sh -c",
        QuoteString(_WRITE),
        "gpufleet-write",
        QuoteString(path),
        mode,
        _stdin=encoded(text),
    )
