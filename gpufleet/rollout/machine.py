"""The rollout state machine: hosts in batches, each drained, upgraded, rebooted, validated.

Per host: pending -> draining -> waiting-for-jobs -> deploying -> rebooting -> validating ->
resuming -> done, or failed (left drained with the reason, never resumed) or skipped (drained
by someone else, or its jobs outlived --wait-for-jobs: returned to service untouched). A state
is written to the state file before its step runs, so a rollout killed anywhere and started
again repeats that (idempotent) step and goes on.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpufleet.rollout import private
from gpufleet.rollout import state as st
from gpufleet.scheduler.rule import ROLLOUT_PREFIX, SchedulerError, reason_text

Step = Callable[[str], tuple[bool, str]]  # host -> (ok, message)
Log = Callable[[str], None]
POLL_S = 5.0
# How long the rollout waits for a slot when hosts it did not fail are out of service (a
# rebooted controller's nodes answer again within seconds; an operator may resume a drain).
SLOT_WAIT_S = 600.0
# How long a resumed host may take to be back in service (a rebooted slurmd registers within
# seconds; Slurm shows the node `idle*` until then). Past it the host fails, drained again.
RESUME_WAIT_S = 300.0


class Scheduler(Protocol):
    """What the rollout needs of a scheduler (gpufleet.scheduler.slurm.Slurm, NoScheduler)."""

    name: str

    def out_of_service(self, names: Sequence[str] = ()) -> dict[str, str]: ...
    def drain(self, name: str, reason: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def running_jobs(self, name: str) -> list[str]: ...


def parse_max_unavailable(text: str, hosts: int) -> int:
    """``"2"`` -> 2; ``"25%"`` of 10 hosts -> 3 (rounded up, as the GPU Operator does); >= 1."""
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 < share <= 100:
                raise ValueError
            return max(1, math.ceil(hosts * share / 100))
        value = int(text)
        if value < 1:
            raise ValueError
        return value
    except ValueError:
        raise st.RolloutError(
            f"--max-unavailable {text!r} is not a count >= 1 or a percentage like 25%"
        ) from None


@dataclass
class Options:
    max_unavailable: int = 1
    max_failures: int = 1
    wait_for_jobs_s: float | None = None  # None: wait for as long as the jobs run
    named: frozenset[str] = frozenset()  # hosts named with --limit: touched even if drained


@dataclass
class Steps:
    deploy: Step
    reboot: Step
    validate: Step


class Rollout:
    """Drive `state` to the end with `scheduler` and `steps`; `save` after every transition."""

    def __init__(
        self,
        state: st.RolloutState,
        scheduler: Scheduler,
        steps: Steps,
        options: Options,
        *,
        state_path: Path,
        textfile: Path | None = None,
        log: Log = print,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state, self.scheduler, self.steps, self.options = state, scheduler, steps, options
        self.state_path, self.textfile, self.log = state_path, textfile, log
        self.sleep, self.clock = sleep, clock
        self._lock = threading.Lock()
        self.drain_reason = f"{ROLLOUT_PREFIX} upgrading"
        self.blocked_by_others = False

    # ------------------------------------------------------------------ state file
    def _set(self, record: st.HostRecord, new: str, reason: str | None = None) -> None:
        with self._lock:
            record.state = new
            if reason is not None:
                record.reason = reason
            record.history.append((time.time(), new))
            st.save(self.state, self.state_path)
            if self.textfile is not None:
                # node_exporter reads it as its own user: 644, through a temp file of ours
                private.write_atomic(self.textfile, st.metrics_text(self.state), mode=0o644)
        suffix = f": {record.reason}" if new in ("failed", "skipped") else ""
        self.log(f"{record.name:20} {new}{suffix}")

    # ------------------------------------------------------------------ one host
    def _fail(self, record: st.HostRecord, step: str, message: str) -> None:
        reason = reason_text("rollout", f"{step} failed: {message}")
        try:
            self.scheduler.drain(record.name, reason)  # the reason now says why it is out
        except SchedulerError as exc:
            reason += f" (could not record it in {self.scheduler.name}: {exc})"
        self._set(record, "failed", reason)

    def _wait_for_jobs(self, record: st.HostRecord) -> bool:
        deadline = None
        if self.options.wait_for_jobs_s is not None:
            deadline = self.clock() + self.options.wait_for_jobs_s
        while jobs := self.scheduler.running_jobs(record.name):
            if deadline is not None and self.clock() >= deadline:
                self.scheduler.resume(record.name)
                record.drained_by_us = False
                self._set(
                    record,
                    "skipped",
                    f"job(s) {', '.join(jobs)} still running after "
                    f"{self.options.wait_for_jobs_s:.0f} s (--wait-for-jobs); returned to service",
                )
                return False
            self.sleep(POLL_S)
        return True

    def advance(self, record: st.HostRecord) -> None:
        """Take one host from its recorded state to done, failed or skipped."""
        try:
            self._advance(record)
        except SchedulerError as exc:
            self._set(record, "failed", reason_text("rollout", f"{record.state}: {exc}"))

    def _advance(self, record: st.HostRecord) -> None:
        if record.state == "pending":
            self._set(record, "draining", self.drain_reason)
        if record.state == "draining":
            self.scheduler.drain(record.name, self.drain_reason)
            record.drained_by_us = True
            self._set(record, "waiting-for-jobs")
        if record.state == "waiting-for-jobs":
            if not self._wait_for_jobs(record):
                return
            self._set(record, "deploying")
        for step, what, call, after in (
            ("deploying", "deploy", self.steps.deploy, "rebooting"),
            ("rebooting", "reboot", self.steps.reboot, "validating"),
            ("validating", "validation", self.steps.validate, "resuming"),
        ):
            if record.state == step:
                ok, message = call(record.name)
                if not ok:
                    self._fail(record, what, message)
                    return
                self._set(record, after)
        if record.state == "resuming":
            self.scheduler.resume(record.name)
            record.drained_by_us = False
            still_out = self._wait_in_service(record.name)
            if still_out is not None:
                self._fail(
                    record,
                    "resume",
                    f"not back in service {RESUME_WAIT_S:.0f} s after its resume ({still_out})",
                )
                return
            self._set(record, "done", "")

    def _wait_in_service(self, name: str) -> str | None:
        """None once the scheduler gives the host jobs again; else why not, at the deadline.

        Done means in service: the next batch counts a host that does not respond yet as out,
        and --max-unavailable would be exceeded for a moment without this wait.
        """
        deadline = self.clock() + RESUME_WAIT_S
        while True:
            out = self.scheduler.out_of_service([name])
            if name not in out:
                return None
            if self.clock() >= deadline:
                return out[name]
            self.sleep(POLL_S)

    # ------------------------------------------------------------------ the fleet
    def failures(self) -> int:
        return len(self.state.in_state("failed"))

    def next_batch(self) -> tuple[list[st.HostRecord], str]:
        """Hosts to start now (skipping those drained by others), or why none can start."""
        pending = self.state.in_state("pending")
        if not pending:
            return [], ""
        if self.failures() >= self.options.max_failures:
            return (
                [],
                f"{self.failures()} host(s) failed: "
                f"--max-failures {self.options.max_failures} reached",
            )
        out = self.scheduler.out_of_service(list(self.state.hosts))
        for record in pending:
            if record.name in out and record.name not in self.options.named:
                self._set(
                    record, "skipped", f"out of service already ({out[record.name]}); not touched"
                )
        pending = self.state.in_state("pending")
        ours = {r.name for r in self.state.in_state(*st.IN_PROGRESS)}
        unavailable = set(out) | ours
        slots = self.options.max_unavailable - len(unavailable)
        self.blocked_by_others = bool(unavailable - {r.name for r in self.state.in_state("failed")})
        if pending and slots <= 0:
            shown = ", ".join(sorted(unavailable))
            return [], (
                f"{len(unavailable)} host(s) out of service ({shown}), --max-unavailable "
                f"{self.options.max_unavailable}: no host can start"
            )
        return pending[: max(slots, 0)], ""

    def run(self) -> st.RolloutState:
        """Continue hosts a killed run left in progress, then batch by batch to the end."""
        resumed = self.state.in_state(*st.IN_PROGRESS)
        if resumed:
            self.log(
                f"resuming {len(resumed)} host(s) left in progress: "
                + ", ".join(r.name for r in resumed)
            )
        batch = resumed
        waited_since = None
        while True:
            if not batch:
                self.blocked_by_others = False
                batch, why = self.next_batch()
                if not batch and why and self.blocked_by_others:
                    waited_since = waited_since if waited_since is not None else self.clock()
                    if self.clock() - waited_since < SLOT_WAIT_S:
                        self.sleep(POLL_S)  # a slot may free up: wait for it, then retry
                        continue
                waited_since = None
                if not batch:
                    self.state.stopped_because = why
                    with self._lock:
                        st.save(self.state, self.state_path)
                    return self.state
            with ThreadPoolExecutor(max_workers=len(batch)) as pool:
                list(pool.map(self.advance, batch))
            batch = []


def plan(
    state: st.RolloutState, scheduler: Scheduler, options: Options, drain: str = ""
) -> list[str]:
    """What `--dry` prints: the batches, how each host is drained, which are skipped and why.

    ``drain`` describes the drain method, ``{host}`` standing for the host's name.
    """
    out = scheduler.out_of_service(list(state.hosts))
    lines, pending = [], []
    for record in state.hosts.values():
        if record.state != "pending":
            lines.append(f"{record.name}: {record.state} (from the state file)")
        elif record.name in out and record.name not in options.named:
            lines.append(f"{record.name}: skipped: out of service already ({out[record.name]})")
        else:
            pending.append(record.name)
    others = len(set(out) - set(pending))
    size = options.max_unavailable - others
    if pending and size <= 0:
        lines.append(f"no batch can start: {others} host(s) already out of service")
        return lines
    for number, start in enumerate(range(0, len(pending), max(size, 1)), 1):
        batch = pending[start : start + size]
        lines.append(f"batch {number}: {', '.join(batch)}")
        if drain:
            lines += [f"  {name}: drain: {drain.replace('{host}', name)}" for name in batch]
    return lines
