"""The state one validation run collects for its results JSON, shared by conftest and checks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from validation import hostinfo
from validation.expectations import Expectations


@dataclass
class RunState:
    """Everything one run collects for its results JSON."""

    expectations: Expectations
    tier: str
    run_id: str
    started_at: str
    t0: float = field(default_factory=time.monotonic)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    gpu_health: dict[str, Any] | None = None
    run_error: str | None = None
    resolution: dict[str, Any] | None = None
    target: str | None = None
    infos: dict[str, hostinfo.HostInfo] = field(default_factory=dict)


STATE = pytest.StashKey[RunState]()


@dataclass
class CheckRecord:
    """What a check attaches to its entry in the results: figures and a one-line message."""

    figures: dict[str, Any]
    messages: dict[str, str]
    nodeid: str

    def __call__(self, message: str | None = None, **figures: Any) -> None:
        self.figures.update(figures)
        if message is not None:
            self.messages[self.nodeid] = message
