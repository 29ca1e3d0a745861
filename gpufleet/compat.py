"""Python 3.10 idioms the on-host payload needs on Python 3.9 too (Ubuntu 20.04's python3.9)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

# The payload (validation/ and gpufleet/, shipped to each host) runs on the host environment's
# Python, which may be 3.9: focal's python3.9 venv, or a conda env with python_version 3.9,
# both of which TensorFlow up to 2.20 supports. There `zip(..., strict=True)` is a TypeError
# and `isinstance(x, int | float)` too, so the payload uses this and tuples instead.


def zip_strict(*iterables: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """``zip(*iterables, strict=True)``: a ValueError when the lengths differ.

    Example: ``list(zip_strict([1, 2], "ab")) == [(1, "a"), (2, "b")]``
    """
    items = [list(iterable) for iterable in iterables]
    lengths = [len(item) for item in items]
    if len(set(lengths)) > 1:
        raise ValueError(f"zip_strict: the iterables' lengths differ: {lengths}")
    return zip(*items)  # noqa: B905 (lengths checked above; strict= needs Python 3.10)
