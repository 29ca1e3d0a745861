"""The state one validation run collects for its results JSON, shared by conftest and checks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from validation.host import hostinfo
from validation.verdicts.expectations import Expectations


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
    # The results' ``vendor`` section (gpufleet.vendor.section), filled by the vendor checks.
    vendor: dict[str, Any] = field(default_factory=lambda: {"dcgm": None, "nccl_tests": None})
    # The quick tier's one process (validation.workloads.bundle): workload -> its document
    # (None: it wrote none), and how the process ended, filled by the first workload's test.
    bundle: dict[str, dict[str, Any] | None] | None = None
    bundle_end: str = ""


STATE = pytest.StashKey[RunState]()


def vendor_section(state: RunState) -> dict[str, Any]:
    """The results' ``vendor`` section: what the vendor checks recorded, and for a DCGM check
    skipped before it ran (a GPU-less host: the ``gpu`` fixture skips it) its skip reason, so
    the section says why DCGM did not run. (A skipped nccl-tests check stays null: the quick
    tier skips it, and a null keeps the last full run's figure in the reports.)"""
    from gpufleet.report.vendor_section import DCGM_CHECK, vendor_of

    section = dict(state.vendor)
    if section.get("dcgm") is None:
        skipped = [c for c in state.checks.values() if c["name"] == DCGM_CHECK]
        if skipped and skipped[0]["status"] == "skipped":
            dcgm = vendor_of({"checks": skipped})["dcgm"]
            section["dcgm"] = {k: v for k, v in dcgm.items() if k != "from"}
    return section


def nccl_tests_busbw(state: RunState) -> float | None:
    """This host's nccl-tests busbw (GB/s) at the largest message size, measured earlier in
    this run by ``vendor_diagnostics::nccl_allreduce`` (the full tier runs it before the
    workloads); None where it did not run or printed no table.

    The same figure is ``vendor.nccl_tests.busbw_at_largest_gbps`` in the results document.
    """
    from gpufleet.report.vendor_section import nccl_busbw

    return nccl_busbw({"vendor": state.vendor})


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
