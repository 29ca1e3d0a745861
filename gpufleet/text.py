"""Text that is safe to show: credentials in URLs hidden, control characters removed.

Everything gpufleet prints or writes for people passes through here, because much of it comes
from managed hosts (os-release, command output, check messages) or from the inventory:

- :func:`redact` hides the userinfo (``user:password@``, ``token@``) and the query string of
  every URL in a string; results JSON, JUnit XML and HTML get this.
- :func:`plain` also drops control characters (ESC, BEL, C1 codes, ...), so a host cannot send
  terminal escape sequences (title, OSC 8 hyperlinks, OSC 52 clipboard) to the operator's
  terminal, and replaces unencodable lone surrogates with their escape.
- :func:`cell` is :func:`plain` as a ``rich.text.Text``: rich never parses it as markup.

Example: ``plain("https://u:pw@m.example/x?t=1\\x1b]0;T\\x07")`` -> ``"https://***@m.example/x?***]0;T"``
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is a control-node package; the hosts' payload imports this module too
    from rich.text import Text

HIDDEN = "***"
# scheme://[userinfo@]host[/path][?query][#fragment]; userinfo runs to the last "@" before the
# host part ends, as urllib.parse reads it, so an unencoded "@" in a password stays hidden too.
_URL = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?P<userinfo>[^/?#\s]*@)?"
    r"(?P<rest>[^?#\s'\"<>]*)"
    r"(?P<query>\?[^#\s'\"<>]*)?"
)
# C0 controls except newline and tab, DEL, and the C1 range (U+0080-U+009F: 8-bit CSI, OSC...).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _hide(match: re.Match[str]) -> str:
    scheme, userinfo = match["scheme"], match["userinfo"]
    if userinfo and scheme.lower() == "ssh://" and ":" not in userinfo:
        hidden_user = userinfo  # ssh://LOGIN@host names an account, not a secret
    else:
        hidden_user = f"{HIDDEN}@" if userinfo else ""
    query = f"?{HIDDEN}" if match["query"] else ""
    return f"{scheme}{hidden_user}{match['rest']}{query}"


def redact(text: str) -> str:
    """``text`` with each URL's userinfo and query string replaced by ``***``."""
    return _URL.sub(_hide, text) if "://" in text else text


def _encodable(text: str) -> str:
    # A lone surrogate (from JSON's "\udcff" or a non-UTF-8 file name) breaks every UTF-8
    # writer and matplotlib: keep it visible as its escape instead.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def redact_data(value: Any) -> Any:
    """A copy of JSON-like ``value`` with :func:`redact` applied to every string in it, each
    string also made encodable as UTF-8."""
    if isinstance(value, str):
        return _encodable(redact(value))
    if isinstance(value, Mapping):
        return {_encodable(redact(str(k))): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


def plain(value: object) -> str:
    """``value`` as text for a terminal: URLs redacted, control characters removed, tabs as
    spaces, and characters the terminal's UTF-8 cannot carry written as escapes."""
    text = redact(str(value))
    return _encodable(_CONTROL.sub("", text.replace("\t", " ").replace("\r\n", "\n")))


def cell(value: object, style: str = "") -> Text:
    """:func:`plain` as rich Text: shown literally, ``[link=...]`` and ``[/x]`` included."""
    from rich.text import Text

    return Text(plain(value), style=style)
