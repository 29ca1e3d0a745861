"""A stable digest of plain Python values (facts, inventory data, plans), the same in every run."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pyinfra.api.hiddenvalue import HiddenValue


class NotCanonical(ValueError):
    """A value with no stable form (an object whose repr names its address, a function)."""


def canonical(value: Any) -> Any:
    """``value`` as JSON-ready data with sets sorted and dicts keyed by strings.

    Example: ``canonical({"b": {2, 1}})`` is ``{"b": [1, 2]}``
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime.datetime, datetime.date)):
        return {"time": value.isoformat()}  # pyinfra's file facts carry modification times
    if isinstance(value, HiddenValue):  # a secret in the inventory: only its digest
        return {"hidden": hashlib.sha256(str(value.unmask()).encode()).hexdigest()}
    if isinstance(value, bytes):
        return {"bytes": hashlib.sha256(value).hexdigest()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"dataclass": type(value).__qualname__, "fields": canonical(fields)}
    if isinstance(value, Mapping):
        items = [(json.dumps(canonical(k), sort_keys=True), canonical(v)) for k, v in value.items()]
        return {"map": sorted(items, key=lambda item: item[0])}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((canonical(item) for item in value), key=json.dumps)}
    raise NotCanonical(f"{type(value).__qualname__} has no stable form")


def digest(value: Any) -> str:
    """sha256 of ``canonical(value)``; raises ``NotCanonical`` for values with no stable form.

    Example: ``digest({1, 2}) == digest({2, 1})``
    """
    text = json.dumps(canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
