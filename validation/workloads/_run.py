"""One workload run: its arguments, devices, thresholds, and the document being filled in."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from gpufleet.floors.names import dotted
from validation.host.nvml_sampler import NvmlSampler
from validation.verdicts.harness import (
    INCONCLUSIVE,
    NOT_APPLICABLE,
    ABResult,
    HarnessError,
    Verdict,
    compare_ab,
    judge_sample_runs,
)

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
    # gpufleet.floors.derived for this host's kind (validation.workloads._floors.load_floors);
    # floors_reason says why there are none (no GPU, a model the matrix does not know).
    floors: dict[str, Any] = field(default_factory=dict)
    floors_reason: str | None = None
    sampler: NvmlSampler | None = None
    # "GPU busy (PIDs ...)" when another job used a GPU as the run started
    # (validation.host.gpu_busy): every speed check is then inconclusive, never a fail.
    busy: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    measurements: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    log: logging.Logger = field(init=False)

    def __post_init__(self) -> None:
        self.log = logging.getLogger(self.workload)

    @property
    def quick(self) -> bool:
        return bool(self.args.quick)

    @property
    def warm(self) -> bool:
        """A compile-only warm-up of XLA's cache (``--warm-cache``, validation.workloads.warm):
        the same steps built and traced in the same order, each called once, nothing timed."""
        return bool(getattr(self.args, "warm_cache", False))

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def speed_not_applicable(self) -> str | None:
        """The reason speed verdicts cannot be given here (no GPU), else None.

        The threshold ``speed_verdicts_without_gpu = 1`` judges CPU timings anyway: for testing
        the verdict pipeline on GPU-less hosts only (the sandbox), never for a real verdict.
        """
        if self.has_gpu or self.thresholds.get("speed_verdicts_without_gpu"):
            return None
        return NO_GPU

    @property
    def between_run_sd(self) -> float | None:
        """The host's between-process spread (threshold speed_between_run_sd), None: default."""
        value = self.thresholds.get("speed_between_run_sd")
        return float(value) if value else None

    def spread_for(self, metric: str | None) -> tuple[float | None, str]:
        """The between-process spread a speed check of ``metric`` is judged with, and where it
        came from: the host's calibration for that figure, else the inventory's
        speed_between_run_sd, else None (the harness's assumed 5 %, "default")."""
        floor = self.floors.get(dotted(self.workload, metric)) if metric else None
        sd = getattr(floor, "between_run_sd", None)
        if sd is not None:
            return float(sd), str(getattr(floor, "spread_source", "") or "calibration")
        if self.between_run_sd is not None:
            return self.between_run_sd, "inventory speed_between_run_sd"
        return None, "default"

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

    def floor(self, name: str) -> Any:
        """The floor ``name`` (a gpufleet.floors.derived.Floor) this host faces, or None; recorded
        in config["floors"] with its origin, or with why there is none, as the evidence.

        Example: ``run.floor("mixed_precision.speedup.fp16").value`` -> 1.96 on an 8xA100."""
        found = self.floors.get(name)
        entry: dict[str, Any]
        if found is None:
            entry = {"value": None, "origin": self.floors_reason or "no floor of this name"}
        else:
            entry = {"value": found.value, "unit": found.unit, "bound": found.bound}
            entry["origin"] = found.origin
        self.config.setdefault("floors", {})[name] = entry
        return found

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

    def add_check(
        self, name: str, kind: str, verdict: Verdict, evidence: dict[str, Any] | None = None
    ) -> Verdict:
        """Record a check; ``evidence`` (raw pairs or samples) lets the suite and the periodic
        runner judge the check again over every process (validation.verdicts.processes)."""
        if kind not in CHECK_KINDS:
            raise WorkloadError(f"check kind {kind!r} is not one of {CHECK_KINDS}")
        entry: dict[str, Any] = {"name": name, "kind": kind, **verdict.to_dict()}
        if evidence is not None:
            entry["evidence"] = evidence
        self.checks.append(entry)
        self.step("check", f"{name} {verdict.status}: {verdict.reason}")
        return verdict

    def ab(
        self,
        check: str,
        metric: str,
        run_a: Callable[[], object],
        run_b: Callable[[], object],
        *,
        threshold: float,
        pairs: int,
        device: str,
        not_applicable: str | None = None,
        invert: bool = False,
    ) -> ABResult | None:
        """compare_ab for one speed check: records the check, its pairs as evidence and the
        speed-up as ``metric`` (``1/x - 1``, a slowdown, with ``invert``). A measurement the
        harness refuses (HarnessError) becomes an inconclusive check with the reason. A
        warm-up calls each arm once, in compare_ab's order (their first calls trace and
        compile them), and records nothing."""
        if self.warm:
            run_a()
            run_b()
            return None
        if self.busy and not_applicable is None:
            self.add_check(check, "speed", Verdict(INCONCLUSIVE, self.busy))
            return None
        sd, source = self.spread_for(metric)
        try:
            result = compare_ab(
                run_a,
                run_b,
                threshold=threshold,
                pairs=pairs,
                between_run_sd=sd,
                not_applicable=not_applicable,
                on_pair=self.log_pair(device),
            )
        except HarnessError as exc:
            self.add_check(check, "speed", refused(exc, not_applicable))
            return None
        if result.estimate is not None:
            record_metric(self.metrics, metric, result.estimate.to_dict(), invert=invert)
        evidence: dict[str, Any] = {"type": "pairs", "metric": metric, "invert": invert}
        evidence["threshold"] = threshold
        evidence |= {"between_run_sd": sd, "spread_source": source, "runs": [result.pairs]}
        self.add_check(check, "speed", result.verdict, evidence)
        return result

    def sample_check(
        self,
        check: str,
        metric: str | None,
        values: list[float],
        *,
        threshold: float,
        what: str,
        not_applicable: str | None = None,
    ) -> Verdict:
        """A positive figure repeated in this process (TFLOPS, GB/s), judged as judge_sample_runs
        judges several processes; records the check with the values as evidence."""
        if self.busy and not_applicable is None:
            return self.add_check(check, "speed", Verdict(INCONCLUSIVE, self.busy))
        sd, source = self.spread_for(metric)
        try:
            judged = judge_sample_runs(
                [values],
                threshold if not_applicable is None else 1.0,
                what=what,
                between_run_sd=sd,
            )
        except HarnessError as exc:
            return self.add_check(check, "speed", refused(exc, not_applicable))
        if metric and judged.estimate is not None:
            record_metric(self.metrics, metric, judged.estimate.to_dict())
        verdict = judged.verdict
        if not_applicable is not None:
            verdict = Verdict(NOT_APPLICABLE, not_applicable)
        evidence: dict[str, Any] = {"type": "samples", "metric": metric, "what": what}
        evidence["threshold"] = threshold
        evidence |= {"between_run_sd": sd, "spread_source": source, "runs": [list(values)]}
        return self.add_check(check, "speed", verdict, evidence)


def refused(exc: HarnessError, not_applicable: str | None) -> Verdict:
    """The verdict of a measurement the harness refused: inconclusive with the reason (still
    not applicable where the check does not apply anyway)."""
    if not_applicable is not None:
        return Verdict(NOT_APPLICABLE, not_applicable)
    return Verdict(INCONCLUSIVE, f"measurement refused: {exc}")


def record_metric(
    metrics: dict[str, Any], metric: str, estimate: dict[str, Any], *, invert: bool = False
) -> None:
    """``metric`` and ``metric_ci`` from an Estimate's dict; ``1/x - 1`` with ``invert``."""
    value, low, high = estimate["median"], estimate["low"], estimate["high"]
    if invert:
        value, low, high = 1.0 / value - 1.0, 1.0 / high - 1.0, 1.0 / low - 1.0
    metrics[metric] = value
    metrics[f"{metric}_ci"] = [low, high]
