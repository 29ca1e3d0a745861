"""apt with a time bound: each request answers within ``apt_timeout_s`` or is retried once."""

from __future__ import annotations

from typing import Any

from pyinfra.api import OperationError, QuoteString, StringCommand

DEFAULT_APT_TIMEOUT_S = 120
# A whole `apt-get update` may take this many times the per-request bound: every source's
# first try and its one retry, with room for a slow but answering mirror.
UPDATE_FACTOR = 4


def acquire_options(timeout_s: int) -> list[str]:
    """apt's own bounds: a request silent for ``timeout_s`` fails, and is retried once.

    Example: ``acquire_options(5)[:2] == ["-o", "Acquire::http::Timeout=5"]``
    """
    return [
        "-o",
        f"Acquire::http::Timeout={timeout_s}",
        "-o",
        f"Acquire::https::Timeout={timeout_s}",
        "-o",
        f"Acquire::ftp::Timeout={timeout_s}",
        "-o",
        "Acquire::Retries=1",
    ]


def host_timeout(data: Any) -> int:
    """The host's ``apt_timeout_s`` (its NodeSpec checked it; checked again here, as an
    operation can run without one)."""
    value = data.get("apt_timeout_s") if data is not None else None
    if value is None:
        return DEFAULT_APT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 3600:
        raise OperationError(
            f"apt_timeout_s = {value!r} is not a number of seconds from 2 to 3600; fix the "
            "inventory (default 120)"
        )
    return value


# Shell functions shared by the scripts below. gf_stuck: the lines of apt's output ($1) that
# say a mirror or proxy gave no answer in time. gf_explain: the bounded-apt message, naming
# what apt was fetching from and the proxy it went through (credentials cut out of both).
FUNCTIONS = r"""gf_stuck() {
  grep -E '^(W|E|Err)' "$1" \
    | grep -iE 'timed out|could not connect|wait for server fd|connection failed|read error'
}
gf_explain() {
  proxy=
  eval "$(apt-config shell proxy Acquire::http::Proxy 2>/dev/null)"
  urls=$(grep -oE '^(W: Failed to fetch|Err:[0-9]+|Get:[0-9]+|Ign:[0-9]+) [a-z+]+://[^ ]+' "$1" \
    | grep -oE '[a-z+]+://[^ ]+' | sed -E 's#//[^/@]*@#//#' | sort -u | head -n 3 | tr '\n' ' ')
  [ -n "$urls" ] || urls=$(grep -rhoE '(https?|ftp)://[^ ]+' /etc/apt/sources.list \
    /etc/apt/sources.list.d 2>/dev/null | sed -E 's#//[^/@]*@#//#' | sort -u | head -n 3 \
    | tr '\n' ' ')
  via=$(printf '%s' "${proxy:-none}" | sed -E 's#//[^/@]*@#//#')
  echo "gpufleet: bounded apt: apt-get update got no answer in time (each request $2 s," \
    "retried once; the whole update at most $3 s) from mirror ${urls:-unknown}(proxy: $via)." \
    "Fix: check that this mirror or proxy answers from the host (curl -sI URL), or raise" \
    "apt_timeout_s." >&2
}
gf_update() {
  log=$(mktemp) || return 1
  timeout --kill-after=10 "$2" apt-get update -o Acquire::http::Timeout="$1" \
    -o Acquire::https::Timeout="$1" -o Acquire::ftp::Timeout="$1" -o Acquire::Retries=1 \
    >"$log" 2>&1
  rc=$?
  cat "$log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || gf_stuck "$log" >/dev/null; then
    gf_explain "$log" "$1" "$2"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  return "$rc"
}
"""

# `sh -c UPDATE x SECONDS WHOLE`: apt-get update, bounded.
UPDATE = FUNCTIONS + 'gf_update "$1" "$2"\n'

# `sh -c INSTALL_RETRYING x SECONDS WHOLE INSTALL...`: runs the install; only when apt did not
# know a package or version (lists older than a newly pinned version) refreshes the lists
# once, bounded, and tries again. Any other failure (a lock, a 404, an interrupted dpkg, a
# killed controller) is not retried: a second attempt would only double the error, or run on
# with nobody watching.
INSTALL_RETRYING = (
    FUNCTIONS
    + r"""t=$1 whole=$2
shift 2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$@" >"$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ "$rc" -eq 0 ] && exit 0
if grep -Eq "^E: (Unable to locate package |Version '.*' for '.*' was not found)" "$dir/log"
then
  echo "gpufleet: apt does not know a requested package or version: refreshing the package" \
    "lists once and retrying"
  gf_update "$t" "$whole" && "$@" && exit 0
fi
exit "$rc"
"""
)


def update_command(timeout_s: int) -> StringCommand:
    """``apt-get update`` under the bound (``gpufleet-apt-update`` in ps)."""
    return StringCommand(
        "sh -c",
        QuoteString(UPDATE),
        "gpufleet-apt-update",
        str(timeout_s),
        str(timeout_s * UPDATE_FACTOR),
    )


def retrying_command(timeout_s: int, label: str, install: StringCommand) -> StringCommand:
    """``install`` (an apt-get command line) under INSTALL_RETRYING, `label` naming it in ps."""
    return StringCommand(
        "sh -c",
        QuoteString(INSTALL_RETRYING),
        label,
        str(timeout_s),
        str(timeout_s * UPDATE_FACTOR),
        install,
    )
