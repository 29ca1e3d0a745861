"""The cache host's wheelhouse: the fleet's hashed locks downloaded once, laid out as PEP 503."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import FactBase, OperationError, QuoteString, StringCommand, operation
from typing_extensions import override

from gpufleet.operations.python import with_secrets
from gpufleet.operations.stdin import Secret, secret_lines

ROOT = "/var/cache/gpufleet-wheelhouse"  # nginx's root: wheels/ and simple/<project>/
# The manylinux tags of TensorFlow's and numpy's wheels, per machine (pip also takes the older
# tags each implies).
PLATFORMS = {
    machine: tuple(
        f"{tag}_{machine}"
        for tag in ("manylinux2014", "manylinux_2_17", "manylinux_2_27", "manylinux_2_28")
    )
    for machine in ("x86_64", "aarch64")
}

# After pip download into $1/wheels: every wheel hard-linked into $1/simple/<PEP 503 name>/,
# which nginx's autoindex lists as the project's page. The stamp ($2) is written last: the
# request's key ($3), then "SIZE NAME" of every wheel there, which the next plan checks.
_INDEX = r"""set -e
cd "$1"
for f in wheels/*.whl; do
  n=${f##*/}; n=${n%%-*}
  n=$(printf '%s' "$n" | tr 'A-Z_.' 'a-z--' | tr -s -)
  mkdir -p "simple/$n"
  ln -f "$f" "simple/$n/"
done
chmod -R a+rX "$1"
{ printf '%s\n' "$3"; for f in wheels/*.whl; do [ -f "$f" ] && stat -c '%s %n' "$f"; done; } \
  > "$2.tmp"
mv -f "$2.tmp" "$2"
"""

# $1: the wheelhouse, $2: the stamp, $3: the key. "filled" when the stamp is of that request
# and every wheel it lists is there at its size (one deleted or truncated since, and the
# wheelhouse is filled again: review finding 15); else what is not.
_FILLED = r"""cd "$1" 2>/dev/null || { echo 'no wheelhouse'; exit 0; }
{ read -r key || key=; [ "$key" = "$3" ] || { echo "stamp of another request"; exit 0; }
  while read -r size name; do
    [ "$(stat -c %s "$name" 2>/dev/null)" = "$size" ] || { echo "$name missing or cut"; exit 0; }
  done
  echo filled; } < "$2" 2>/dev/null || echo 'no stamp'
"""


class WheelhouseFilled(FactBase):
    """
    ``"filled"`` when the wheelhouse stamp of request ``key`` is there and every wheel it
    lists is at its size; otherwise what is not (``"wheels/x.whl missing or cut"``).

    .. code:: python

        host.get_fact(WheelhouseFilled, root=ROOT, stamp=f"{ROOT}/.gpufleet-{key}", key=key)
    """

    @override
    def command(self, root: str, stamp: str, key: str) -> StringCommand:
        return StringCommand(
            "sh -c",
            QuoteString(_FILLED),
            "gpufleet-wheelhouse",
            QuoteString(root),
            QuoteString(stamp),
            QuoteString(key),
        )

    @staticmethod
    @override
    def default() -> str:
        return "no stamp"

    @override
    def process(self, output: list[str]) -> str:
        return output[-1].strip() if output else "no stamp"


def host_lock(lock_text: str, python_version: str, machine: str) -> str:
    """The lock's lines whose markers hold for CPython ``python_version`` on Linux ``machine``
    (pip download judges markers by the downloading interpreter, not the clients')."""
    from gpufleet.sandbox.state import SandboxError
    from gpufleet.sandbox.wheelhouse import host_lock as marker_lock

    try:
        return marker_lock(lock_text, python_version, PLATFORMS[machine])
    except SandboxError as exc:
        raise OperationError(str(exc)) from None


def request_key(lock: str, python_version: str, machine: str) -> str:
    """What one download is for, as 16 hex digits (its stamp's name)."""
    text = f"{python_version}\n{machine}\n{lock}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@operation()
def filled(
    pip: str,
    lock_path: str,
    lock: str,
    python_version: str,
    machine: str,
    root: str = ROOT,
    index_url: Secret = None,
    trusted_host: str | None = None,
    proxy: Secret = None,
):
    """
    Download the files of a hashed lock for CPython ``python_version`` on ``machine`` into
    ``root/wheels`` (``pip download --require-hashes --no-deps --only-binary=:all:``, so pip
    refuses any file the lock does not list) and index them under ``root/simple``; skipped when
    the stamp of that same request is there and every wheel it lists still is, at its size.

    + pip: the pip executable that downloads
    + lock_path: the lock file on the host (``host_lock`` of the release's lock)
    + lock: its text (the stamp is its digest)
    + index_url, trusted_host, proxy: the upstream index (sent on stdin)
    """
    if machine not in PLATFORMS:
        raise OperationError(f"no wheel platform tags for machine {machine!r}")
    key = request_key(lock, python_version, machine)
    stamp = f"{root}/.gpufleet-{key}"
    if host.get_fact(WheelhouseFilled, root=root, stamp=stamp, key=key) == "filled":
        host.noop(f"wheelhouse has the lock for Python {python_version} on {machine}")
        return
    platforms = [arg for tag in PLATFORMS[machine] for arg in ("--platform", tag)]
    trusted = ["--trusted-host", QuoteString(trusted_host)] if trusted_host else []
    yield StringCommand(
        *with_secrets(),
        QuoteString(pip),
        "download --disable-pip-version-check --no-input --quiet",
        "--only-binary=:all: --implementation cp --python-version",
        QuoteString(python_version),
        *platforms,
        *trusted,
        "--require-hashes --no-deps --dest",
        QuoteString(f"{root}/wheels"),
        "-r",
        QuoteString(lock_path),
        _stdin=secret_lines(proxy=proxy, index_url=index_url),
    )
    yield StringCommand(
        "sh -c",
        QuoteString(_INDEX),
        "gpufleet-wheelhouse",
        QuoteString(root),
        QuoteString(stamp),
        QuoteString(key),
    )
