"""One workload run: its arguments, devices, thresholds, and the document being filled in."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from validation.harness import Verdict
from validation.nvml_sampler import NvmlSampler

NO_GPU = "no GPU"
CHECK_KINDS = ("correctness", "evidence", "speed", "utilization", "memory")


class WorkloadError(RuntimeError):
    """A workload that cannot run as asked; the message says what to change."""


@dataclass
class Run:
    """One workload run: its arguments, devices, thresholds, and the document being filled in."""

    workload: str
    args: argparse.Namespace
    tf: Any = None
    gpus: list[str] = field(default_factory=list)  # TF logical GPU names, "/device:GPU:0", ...
    cpus: list[str] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)
    compute_capability: tuple[int, int] | None = None
    gpu_model: str | None = None
    thresholds: dict[str, float] = field(default_factory=dict)
    sampler: NvmlSampler | None = None
    config: dict[str, Any] = field(default_factory=dict)
    measurements: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, str]] = field(default_factory=list)
    log: logging.Logger = field(init=False)

    def __post_init__(self) -> None:
        self.log = logging.getLogger(self.workload)

    @property
    def quick(self) -> bool:
        return bool(self.args.quick)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def speed_not_applicable(self) -> str | None:
        """The reason speed verdicts cannot be given here (no GPU), else None."""
        return None if self.has_gpu else NO_GPU

    @property
    def compute_devices(self) -> list[str]:
        """The devices the workload trains on: the GPUs, else the logical CPU devices."""
        return self.gpus or self.cpus

    def sizes(
        self, cpu: dict[str, Any], quick_gpu: dict[str, Any], full_gpu: dict[str, Any]
    ) -> dict[str, Any]:
        """The configuration for this run: CPU sizes without a GPU (whatever the tier: CPU
        runs prove correctness only), else the quick or full GPU sizes. Recorded in config."""
        chosen = dict(cpu if not self.has_gpu else quick_gpu if self.quick else full_gpu)
        self.config.update(chosen, tier="quick" if self.quick else "full")
        return chosen

    def step(self, step: str, message: str = "", device: str | None = None) -> None:
        """Log one line to stderr: timestamp, workload, device (default: all in use), step."""
        if device is None:
            device = ",".join(self.compute_devices) or "-"
        device = device.replace("/device:", "")  # "GPU:0", as nvidia-smi users read it
        self.log.info("step=%s %s", step, message, extra={"device": device})

    def threshold(self, key: str) -> float:
        """The threshold ``key``, recorded in config["thresholds"] as the document's evidence."""
        if key not in self.thresholds:
            raise WorkloadError(f"threshold {key!r} is not defined in thresholds.toml")
        value = self.thresholds[key]
        self.config.setdefault("thresholds", {})[key] = value
        return value

    def phase(self, label: str) -> AbstractContextManager[None]:
        """Tag the NVML samples taken inside the block with ``label`` (no-op without NVML)."""
        return self.sampler.phase(label) if self.sampler else nullcontext()

    def timed(self, phase: str, fn: Callable[[], object]) -> Callable[[], object]:
        """``fn`` wrapped so that the NVML samples taken while it runs are tagged ``phase``."""
        sampler = self.sampler
        if sampler is None:
            return fn

        def tagged() -> object:
            with sampler.phase(phase):
                return fn()

        return tagged

    def log_pair(self, device: str) -> Callable[[int, float, float], None]:
        """An ``on_pair`` callback for compare_ab that logs each timed pair."""

        def log(index: int, seconds_a: float, seconds_b: float) -> None:
            self.step(f"pair{index}", f"a={seconds_a:.4f}s b={seconds_b:.4f}s", device)

        return log

    def add_check(self, name: str, kind: str, verdict: Verdict) -> Verdict:
        if kind not in CHECK_KINDS:
            raise WorkloadError(f"check kind {kind!r} is not one of {CHECK_KINDS}")
        self.checks.append({"name": name, "kind": kind, **verdict.to_dict()})
        self.step("check", f"{name} {verdict.status}: {verdict.reason}")
        return verdict
