"""`gpufleet validate`'s progress on stderr: a line per host start and end, and a heartbeat."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from gpufleet.text import plain

HEARTBEAT_S = 60.0


def took(seconds: float) -> str:
    """``41 s``, ``9m41s``, ``1h02m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class Progress:
    """Counts hosts as they finish; thread-safe; silent when ``quiet``.

    Example::

        progress = Progress(64, "quick")
        progress.started("gpu-07")
        progress.finished("gpu-07", "pass")   # [12/64] gpu-07 quick pass 41 s
    """

    def __init__(
        self,
        total: int,
        tier: str,
        *,
        quiet: bool = False,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        current: Callable[[str], str] = lambda host: "",
    ) -> None:
        """``current(host)``: the check that host is on and for how long, or "" (heartbeat)."""
        self.total, self.tier, self.quiet = total, tier, quiet
        self._current = current
        self._out = out
        self._clock = clock
        self._lock = threading.Lock()
        self._done = 0
        self._running: dict[str, float] = {}

    def _print(self, line: str) -> None:
        if not self.quiet:
            print(plain(line), file=self._out or sys.stderr, flush=True)

    def started(self, host: str, detail: str = "") -> None:
        with self._lock:
            self._running[host] = self._clock()
            more = f" ({detail})" if detail else ""
            self._print(f"[{self._done}/{self.total}] {host} {self.tier} started{more}")

    def finished(self, host: str, status: str, why: str = "") -> None:
        with self._lock:
            begun = self._running.pop(host, self._clock())
            self._done += 1
            reason = f" ({why.splitlines()[0][:120]})" if why else ""
            self._print(
                f"[{self._done}/{self.total}] {host} {self.tier} {status} "
                f"{took(self._clock() - begun)}{reason}"
            )

    def heartbeat(self) -> None:
        with self._lock:
            if not self._running:
                return
            now = self._clock()
            hosts = ", ".join(
                f"{h} {took(now - t)}" + (f" on {on}" if (on := self._current(h)) else "")
                for h, t in self._running.items()
            )
            self._print(f"[{self._done}/{self.total}] still running: {hosts}")

    def beat_every(self, seconds: float = HEARTBEAT_S) -> Callable[[], None]:
        """Start a heartbeat thread; returns the function that stops it."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(seconds):
                self.heartbeat()

        thread = threading.Thread(target=beat, name="gpufleet-heartbeat", daemon=True)
        thread.start()
        return stop.set


def document_status(document: dict[str, Any] | None) -> tuple[str, str]:
    """A finished host's status and, for an error, the reason's first line."""
    if document is None:
        return "error", "no result"
    if document.get("did_not_run"):  # a Slurm job that never ran: its own verdict, not a pass
        return "did-not-run", str(document.get("run_error") or "")
    status = str(document.get("status", "error"))
    return status, str(document.get("run_error") or "") if status == "error" else ""
