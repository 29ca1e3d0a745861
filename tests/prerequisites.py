"""A test's missing prerequisite (a tool, TensorFlow): a skip on a developer's machine, a
failure in CI (``CI=true`` in the environment), where a skip would hide that the test never ran."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(reason: str) -> NoReturn:
    """Skip with ``reason``, or fail with it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a missing prerequisite fails, it is not skipped)")
    pytest.skip(reason)


def require_tools(*tools: str, install: str) -> None:
    """`missing` unless every one of ``tools`` is on PATH; ``install`` says how to get them."""
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if absent:
        missing(f"missing {', '.join(absent)} ({install})")
