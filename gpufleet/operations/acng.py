"""apt-cacher-ng's admin login, generated once on the cache host, and paths that must be gone.

Both operations act on what the host probe read in its one round trip (gpufleet.stages.host_config
``acng_admin``, ``nginx_default``): no fact of their own."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

USER = "apt-cacher-ng"  # the Debian package's service user (its unit's User= and Group=)
# The one line the login file holds besides its comment (what the probe counts): 32 letters
# and digits from /dev/urandom.
LOGIN_LINE = r"^AdminAuth: gpufleet:[A-Za-z0-9]{32}$"
IN_ORDER = (f"{USER}:{USER}:600", "1")  # the probe's acng_admin for a file in order

# $1: the file, $2: the user that owns it. Writes "AdminAuth: gpufleet:<secret>" into a new
# mode-600 file beside the target and renames it over the target. The secret is made on the
# host and goes only into that file: printf is sh's builtin, so it is on no command line, and
# nothing prints it.
_GENERATE = r"""set -e
umask 077
tmp=$(mktemp -- "$1.gpufleet-XXXXXXXX")
trap 'rm -f -- "$tmp"' EXIT
secret=$(LC_ALL=C tr -dc A-Za-z0-9 </dev/urandom | head -c 32)
[ ${#secret} -eq 32 ]
printf '%s\n' "# gpufleet: apt-cacher-ng's admin login, generated once; edits are overwritten." \
  "AdminAuth: gpufleet:$secret" > "$tmp"
chown "$2:$2" -- "$tmp"
chmod 600 -- "$tmp"
mv -f -- "$tmp" "$1"
trap - EXIT
"""


@operation()
def admin_login(path: str, current: tuple[str, ...] = ()):
    """
    Ensure ``path`` holds an apt-cacher-ng ``AdminAuth`` login with a secret generated on the
    host, owned by the service's user at mode 600 (the service reads it as that user). A file
    that holds a well-formed login keeps its secret: only its owner and mode are put right.

    + path: absolute path of the login file
    + current: what the probe read of it, ``("OWNER:GROUP:MODE", "LOGIN LINES")``, or ``()``
      when it does not exist

    **Example:**

    .. code:: python

        admin_login(
            name="apt-cacher-ng admin login",
            path="/etc/apt-cacher-ng/zz_gpufleet_security.conf",
            current=("root:root:644", "1"),
        )
    """
    if not path.startswith("/"):
        raise OperationError(f"admin_login: path {path!r} must be absolute")
    user = USER
    if len(current) == 2 and current[1].strip() == "1":
        if tuple(current) == IN_ORDER:
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
def absent(path: str, present: bool):
    """
    Ensure nothing is at ``path`` (a file or a symlink, a dangling one too).

    + present: whether the probe found anything there

    **Example:**

    .. code:: python

        absent(name="no default site", path="/etc/nginx/sites-enabled/default", present=True)
    """
    if not path.startswith("/"):
        raise OperationError(f"absent: path {path!r} must be absolute")
    if not present:
        host.noop(f"{path} is already absent")
        return
    yield StringCommand("rm -f --", QuoteString(path))
