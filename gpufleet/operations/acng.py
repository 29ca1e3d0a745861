"""apt-cacher-ng's admin login, generated once on the cache host, and paths that must be gone."""

from __future__ import annotations

import re

from pyinfra import host
from pyinfra.api import FactBase, OperationError, QuoteString, StringCommand, operation
from typing_extensions import override

USER = "apt-cacher-ng"  # the Debian package's service user (its unit's User= and Group=)
# The one line the login file holds besides its comment: 24 random bytes, URL-safe base64.
LOGIN_LINE = r"^AdminAuth: gpufleet:[A-Za-z0-9_-]{32,}$"

# $1: the file, $2: the user that owns it. Writes "AdminAuth: gpufleet:<secret>" into a new
# mode-600 file beside the target and renames it over the target. The secret is made on the
# host and goes only into that file: printf is sh's builtin, so it is on no command line, and
# nothing prints it.
_GENERATE = r"""set -e
umask 077
tmp=$(mktemp -- "$1.gpufleet-XXXXXXXX")
trap 'rm -f -- "$tmp"' EXIT
secret=$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
printf '%s\n' "# gpufleet: apt-cacher-ng's admin login, generated once; edits are overwritten." \
  "AdminAuth: gpufleet:$secret" > "$tmp"
chown "$2:$2" -- "$tmp"
chmod 600 -- "$tmp"
mv -f -- "$tmp" "$1"
trap - EXIT
"""


class AdminLogin(FactBase):
    """
    Owner, mode and how many well-formed login lines an apt-cacher-ng login file has, or
    ``None`` when it does not exist. The secret itself is never read back.

    .. code:: python

        {"owner": "apt-cacher-ng", "mode": "600", "lines": 1}
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if [ -f",
            QuoteString(path),
            "]; then stat -c '%U %a'",
            QuoteString(path),
            "&& { grep -cE",
            QuoteString(LOGIN_LINE),
            QuoteString(path),
            "|| true; }; fi",
        )

    @override
    def process(self, output: list[str]) -> dict[str, object] | None:
        if len(output) < 2:
            return None
        owner, _, mode = output[0].strip().partition(" ")
        count = output[1].strip()
        return {"owner": owner, "mode": mode, "lines": int(count) if count.isdigit() else 0}


class PathPresent(FactBase):
    """
    Whether anything is at a path, a dangling symlink too (``[ -e ]`` follows links).

    .. code:: python

        True
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if [ -L", QuoteString(path), "] || [ -e", QuoteString(path), "]; then echo yes; fi"
        )

    @staticmethod
    @override
    def default() -> bool:
        return False

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[0].strip() == "yes"


@operation()
def admin_login(path: str, user: str = USER):
    """
    Ensure ``path`` holds an apt-cacher-ng ``AdminAuth`` login with a secret generated on the
    host, owned by ``user`` at mode 600 (the service reads it as that user). A file that holds
    a well-formed login keeps its secret: only its owner and mode are put right.

    **Example:**

    .. code:: python

        admin_login(name="apt-cacher-ng admin login", path="/etc/apt-cacher-ng/zz_x.conf")
    """
    if not path.startswith("/") or not re.fullmatch(r"[A-Za-z0-9_.-]+", user):
        raise OperationError(f"admin_login: path {path!r} must be absolute, user {user!r} a name")
    found = host.get_fact(AdminLogin, path=path)
    if found is not None and found["lines"] == 1:
        if found["owner"] == user and found["mode"] == "600":
            host.noop(f"{path} holds the admin login (owner {user}, mode 600)")
            return
        yield StringCommand(
            "chown", f"{user}:{user}", QuoteString(path), "&& chmod 600", QuoteString(path)
        )
        return
    yield StringCommand(
        "sh -c", QuoteString(_GENERATE), "gpufleet-login", QuoteString(path), QuoteString(user)
    )


@operation()
def absent(path: str):
    """
    Ensure nothing is at ``path`` (a file or a symlink, a dangling one too).

    **Example:**

    .. code:: python

        absent(name="no default site", path="/etc/nginx/sites-enabled/default")
    """
    if not path.startswith("/"):
        raise OperationError(f"absent: path {path!r} must be absolute")
    if not host.get_fact(PathPresent, path=path):
        host.noop(f"{path} is already absent")
        return
    yield StringCommand("rm -f --", QuoteString(path))
