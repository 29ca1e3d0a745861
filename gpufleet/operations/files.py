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

from gpufleet.operations.probes import file_digest, owner_differs
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
        if owner_differs(current):  # review finding 9: another user could rewrite it
            yield StringCommand("chown root:root", QuoteString(path))
        if current["mode"] != mode:
            yield StringCommand("chmod", mode, QuoteString(path))
        elif not owner_differs(current):
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


@operation(is_idempotent=False)
def removed(paths: list[str], then: list[str] | None = None):
    """
    Remove ``paths`` (which the plan found present), then run ``then``: the caller decides
    from what the host probe read, so this reads nothing itself.

    **Example:**

    .. code:: python

        removed(
            name="foreign override removed",
            paths=["/run/systemd/system/x.service"],
            then=["systemctl daemon-reload"],
        )
    """
    bad = [p for p in paths if not p.startswith("/")]
    if bad or not paths:
        raise OperationError(f"removed: give absolute paths, not {bad or 'none'}")
    yield StringCommand("rm -f --", *[QuoteString(p) for p in paths])
    yield from then or ()


# $1: the file, $2: the note; then the lines (as the probe printed them, trimmed) to comment
# out. The rest of the file is kept as it is, its owner and mode too; replaced in one rename.
_COMMENT = r"""set -e
f=$1; note=$2; shift 2
tmp=$(mktemp -- "$f.gpufleet-XXXXXXXX")
trap 'rm -f -- "$tmp"' EXIT
awk -v note="$note" 'BEGIN { for (i = 2; i < ARGC; i++) { bad[ARGV[i]] = 1; delete ARGV[i] } }
{ t = $0; sub(/^[ \t]+/, "", t); sub(/[ \t]+$/, "", t)
  if (t in bad) print "# " note ": " $0; else print }' "$f" "$@" > "$tmp"
chown --reference="$f" -- "$tmp"
chmod --reference="$f" -- "$tmp"
mv -f -- "$tmp" "$f"
trap - EXIT
"""


@operation(is_idempotent=False)
def lines_commented(path: str, lines: list[str], note: str, then: list[str] | None = None):
    """
    Comment out ``lines`` of ``path`` (matched whole, surrounding blanks aside), prefixed with
    ``note``; the rest of the file stays. Then run ``then``.

    **Example:**

    .. code:: python

        lines_commented(
            name="nouveau no longer loaded by /etc/modules-load.d/x.conf",
            path="/etc/modules-load.d/x.conf",
            lines=["nouveau"],
            note="gpufleet: nouveau must not load beside the NVIDIA driver",
        )
    """
    if not path.startswith("/") or not lines:
        raise OperationError(f"lines_commented: {path!r} must be absolute, with lines to change")
    yield StringCommand(
        "sh -c",
        QuoteString(_COMMENT),
        "gpufleet-comment",
        QuoteString(path),
        QuoteString(note),
        *[QuoteString(line) for line in lines],
    )
    yield from then or ()
