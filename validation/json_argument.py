"""Command-line options whose value is a JSON object, given inline or as @FILE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def json_object(text: str | None, option: str, error: type[Exception]) -> dict[str, Any] | None:
    """The JSON object ``text`` holds (or the file ``@PATH`` holds); None without a value.

    Raises ``error`` naming ``option`` when the value is not readable JSON or not an object.

    Example: ``json_object('{"a": 1}', "--thresholds", ValueError) == {"a": 1}``
    """
    if not text:
        return None
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
        data = json.loads(raw)
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"{option} must be a JSON object or @FILE holding one: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{option} must be a JSON object; got {type(data).__name__}")
    return data
