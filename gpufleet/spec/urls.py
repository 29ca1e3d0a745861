"""The URL keys: a strict format, their credentials hidden, apt's proxy and logins rebuilt."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit, urlunsplit

if TYPE_CHECKING:  # the suite imports the spec on hosts, which have no pyinfra
    from pyinfra.api.hiddenvalue import HiddenValue

URL_KEYS = (
    "nvidia_repo_url",
    "nvidia_repo_key_url",
    "apt_proxy",
    "cache_upstream_proxy",
    "pip_index_url",
    "miniforge_url",
    "nccl_tests_url",
    "conda_channel_url",
)
_SCHEMES = {
    "apt_proxy": ("http", "https"),
    "cache_upstream_proxy": ("http",),
    "nvidia_repo_url": ("http", "https", "file"),
}
_DEFAULT_SCHEMES = ("http", "https", "file")
# RFC 3986 characters, less those that mean something to a shell, apt.conf, a curl config or
# systemd (' ; $ ` " \ and every space or control character): a URL needing one of them can
# always spell it percent-encoded.
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!&()*+,=%]+")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]")
_LOGIN = re.compile(r"[^\s\x00-\x1f\x7f]+")  # apt's auth.conf splits on whitespace


def url_errors(key: str, value: str, shown: str = "'***'") -> list[str]:
    """What is wrong with a URL key's value; ``shown`` stands for the value in messages (never
    the value itself: it may hold a password)."""
    fix = "Fix: give the full URL, e.g. http://proxy.example:3128"
    name, key = key, f"{key} = {shown}"
    if not _URL_CHARS.fullmatch(value):
        return [
            f"{key} holds a space, quote, ';', '$', backslash or control character. {fix}, "
            "with such characters percent-encoded (%20 for a space)."
        ]
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        return [f"{key} is not a valid URL ({exc}). {fix}."]
    schemes = _SCHEMES.get(name, _DEFAULT_SCHEMES)
    if parts.scheme not in schemes:
        kinds = "an http(s):// or file://" if "file" in schemes else "an http(s)://"
        return [f"{key} is not {kinds} URL. {fix}."]
    host = parts.hostname or ""
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return [f"{key} is a file:// URL with a host or no absolute path. {fix}."]
        return []
    if not (_HOST.fullmatch(host) or _IPV6.fullmatch(f"[{host}]")) or port == 0:
        return [f"{key} has no valid host name (or port). {fix}."]
    if name == "cache_upstream_proxy" and "@" in parts.netloc:
        return [f"{key} has a login; apt-cacher-ng's config is no place for one. {fix}."]
    if name in ("apt_proxy", "cache_upstream_proxy") and (
        parts.path not in ("", "/") or parts.query or parts.fragment
    ):
        return [f"{key} has a path, query or fragment; a proxy is scheme://[user:pw@]host:port."]
    if name == "nvidia_repo_url" and (parts.query or parts.fragment):
        return [
            f"{key} has a query or fragment, which apt cannot use. Fix: give the repository's "
            "base URL; a login goes in as https://user:password@host/path."
        ]
    if name == "conda_channel_url" and (parts.query or parts.fragment):
        return [
            f"{key} has a query or fragment, which conda's channel_alias cannot use. Fix: give "
            "the base URL your mirror serves conda-forge/ under; a login goes in as "
            "https://user:password@host/path."
        ]
    if name == "conda_channel_url" and parts.path.rstrip("/").endswith("/conda-forge"):
        return [
            f"{key} ends with /conda-forge, but it is the base conda adds the channel name to "
            "(channel_alias). Fix: drop the trailing /conda-forge, e.g. "
            "https://conda-mirror.example.net for https://conda-mirror.example.net/conda-forge."
        ]
    for part in (parts.username, parts.password):
        if part is not None and not _LOGIN.fullmatch(unquote(part) or "x"):
            return [f"{key} has a user name or password with a space or control character."]
    return []


def redacted(url: str) -> str:
    """The URL as messages may show it: login and query replaced by ``***``, or ``***`` alone
    when it cannot be shown safely (unparseable, or characters a terminal would act on).

    Example: ``redacted("https://u:pw@m.example/x?token=t") == "https://***@m.example/x?***"``
    """
    if not _URL_CHARS.fullmatch(url):
        return "***"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in url and "@" not in netloc:
        return "***"  # a login where urlsplit sees none (no scheme): hide it all
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "***" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, "***" if parts.fragment else ""))


def has_secret(url: str | None) -> bool:
    """Whether a URL carries a login (``user[:password]@``) or a query string (tokens)."""
    if not url:
        return False
    parts = urlsplit(url)
    return "@" in parts.netloc or bool(parts.query)


def hidden(url: str | None) -> HiddenValue | str | None:
    """The URL as pyinfra should get it: a ``HiddenValue`` whenever it carries a secret."""
    from pyinfra.api.hiddenvalue import HiddenValue

    return HiddenValue(url) if url and has_secret(url) else url


def without_login(url: str) -> str:
    """The URL with no ``user:password@``: ``https://u:p@m.example/x`` -> ``https://m.example/x``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def apt_login(url: str) -> str | None:
    """An apt_auth.conf(5) line for the URL's login, or None when it has none.

    Example: ``apt_login("https://u:p%21@m.example/cuda")``
    -> ``"machine https://m.example/cuda login u password p!\\n"``
    """
    parts = urlsplit(url)
    if parts.username is None:
        return None
    machine = without_login(url).rstrip("/")
    return (
        f"machine {machine} login {unquote(parts.username)} "
        f"password {unquote(parts.password or '')}\n"
    )


def proxy_url(value: str) -> str:
    """An apt_proxy value rebuilt from its parsed parts (login percent-encoded, no path), so
    that nothing but a URL can reach apt.conf: ``http://u:p@proxy.example:3128``."""
    parts = urlsplit(value)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    if parts.username is not None:
        login = quote(unquote(parts.username), safe="")
        if parts.password is not None:
            login += ":" + quote(unquote(parts.password), safe="")
        netloc = f"{login}@{netloc}"
    return urlunsplit((parts.scheme, netloc, "", "", ""))
