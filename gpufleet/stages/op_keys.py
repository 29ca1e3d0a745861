"""Operations keyed by what they manage, so hosts share one only when they manage the same thing.

pyinfra identifies an operation by where it is called (file lines, plus ``host.loop``'s index):
the same call made for different packages or paths on different hosts becomes one operation
with several names, and a plan (``--dry --json``) shows only one of them. Keying the call by
the package or path instead of the loop index keeps one operation, and one name, per thing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from pyinfra import host


def _position(key: str) -> int:
    # Stable across runs and hosts (unlike hash()): operations with equal keys line up.
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)


@contextmanager
def keyed(key: str) -> Iterator[None]:
    """Operations called inside get an identity of their own for ``key``.

    Example::

        with keyed(env_file):
            files.content(name=f"{env_file}: CUDA wheel settings", path=env_file, text=...)
    """
    host.loop_position.append(_position(key))
    try:
        yield
    finally:
        host.loop_position.pop()


def each(keys: Iterable[str]) -> Iterator[str]:
    """``for package in each(packages):`` like ``host.loop``, one identity per key, not index."""
    for key in keys:
        with keyed(key):
            yield key
