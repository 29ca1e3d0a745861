"""How a NodeSpec key is declared: its default, one-line doc, allowed values and secrecy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any


def key_meta(doc: str, choices: Sequence[str] = (), secret: bool = False) -> dict[str, Any]:
    """The field metadata gpufleet reads back: ``{"doc", "choices", "secret"}``."""
    return {"doc": doc, "choices": tuple(choices), "secret": secret}


def key_field(default: Any, doc: str, choices: Sequence[str] = (), secret: bool = False) -> Any:
    """A NodeSpec field with its one-line doc (and allowed values) in the field metadata.

    Example: ``reboot: str = key_field("auto", "reboot policy", ("auto", "never", "always"))``
    """
    return field(default=default, metadata=key_meta(doc, choices, secret), repr=not secret)


def key_table(rows: Sequence[tuple[str, str, str]]) -> str:
    """An RST table of (key, default, meaning) rows, for NodeSpec's docstring.

    Example: ``key_table([("reboot", "'auto'", "reboot policy")])``
    """
    widths = [max(len(r[i]) for r in [*rows, ("key", "default", "meaning")]) for i in range(2)]
    rule = f"{'=' * widths[0]} {'=' * widths[1]} {'=' * 40}"
    lines = [rule, f"{'key':{widths[0]}} {'default':{widths[1]}} meaning", rule]
    lines += [f"{n:{widths[0]}} {d:{widths[1]}} {doc}" for n, d, doc in rows]
    return "\n".join([*lines, rule])
