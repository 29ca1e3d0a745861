"""Secrets and file contents sent to host commands on stdin, never in a command line.

Everything in a command line is readable by every local user of the host (``/proc/PID/cmdline``
of ``sudo`` and ``sh``), and pyinfra prints it with ``-vv``. What arrives on stdin is read by the
root shell into shell variables (``read`` is a builtin: no process of its own) and handed on as
environment variables or files in a private directory, which only root can read.
"""

from __future__ import annotations

import base64

from pyinfra.api import HiddenValue

Secret = str | HiddenValue | None

# Reads the proxy and the pip index from stdin, one line each, and exports them for what runs
# next: curl and pip read `http_proxy`/`https_proxy`, pip reads `PIP_INDEX_URL`.
SECRET_ENV = r"""IFS= read -r gpufleet_proxy || true
IFS= read -r gpufleet_index || true
if [ -n "$gpufleet_proxy" ]; then
  export http_proxy="$gpufleet_proxy" https_proxy="$gpufleet_proxy"
fi
if [ -n "$gpufleet_index" ]; then export PIP_INDEX_URL="$gpufleet_index"; fi
unset gpufleet_proxy gpufleet_index
"""

# After SECRET_ENV: reads the URL from stdin and downloads it into "$tmp/$name" through a curl
# config file in the private directory (the URL may carry credentials); needs $tmp, $name.
FETCH = r"""IFS= read -r gpufleet_url || true
printf 'url = "%s"\noutput = "%s"\n' "$gpufleet_url" "$tmp/$name" > "$tmp/curlrc"
unset gpufleet_url
curl -fsSL --retry 3 -K "$tmp/curlrc"
"""

# A private directory for the run: mktemp -d makes it mode 700, with a name nobody can guess.
PRIVATE_TMP = r"""tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/gpufleet.XXXXXXXXXX")
trap 'rm -rf "$tmp"' EXIT
"""


def plain(value: Secret) -> str:
    """The value itself ("" for None), a ``HiddenValue`` unmasked."""
    if value is None:
        return ""
    return value.unmask() if isinstance(value, HiddenValue) else value


def secret_lines(*, proxy: Secret = None, index_url: Secret = None, url: Secret = None) -> str:
    """Stdin for ``SECRET_ENV`` (then ``FETCH`` when ``url``): one value per line."""
    values = [plain(proxy), plain(index_url)] + ([plain(url)] if url is not None else [])
    for value in values:
        if "\n" in value or "\r" in value:
            raise ValueError("a value sent on stdin holds a line break")
    return "\n".join(values) + "\n"


def encoded(data: bytes | str) -> str:
    """``data`` as one base64 line, for ``base64 -d`` on the host (stdin is text, line-based)."""
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode() + "\n"
