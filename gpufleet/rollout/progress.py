"""The rollout as people watch it: a host table redrawn in place on a terminal, lines in a log.

On a terminal every transition is printed as a line above a live table of the hosts (state,
time in that state, reason) and the counts; in a pipe or a CI log only the lines are printed,
one per transition, so the output can be read and grepped afterwards.

Example:
    >>> with display(state, Console()) as log:
    ...     Rollout(state, scheduler, steps, options, state_path=path, log=log).run()
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gpufleet.rollout import state as st
from gpufleet.rollout.machine import Log


def host_table(state: st.RolloutState, now: float | None = None) -> Table:
    """Every host with its state, how long it has been in it, and its reason."""
    now = time.time() if now is None else now
    table = Table(title="gpufleet rollout")
    for column in ("host", "state", "for", "reason"):
        table.add_column(column)
    for record in state.hosts.values():
        since = record.history[-1][0] if record.history else None
        held = "" if since is None or record.state in st.FINAL else f"{now - since:.0f} s"
        table.add_row(record.name, record.state, held, Text(record.reason))
    return table


def counts_line(state: st.RolloutState) -> str:
    """``hosts: 1 done, 1 deploying, 1 pending`` (and why the rollout stopped, if it did)."""
    counts = ", ".join(f"{n} {s}" for s, n in state.counts().items() if n)
    stopped = f"; stopped: {state.stopped_because}" if state.stopped_because else ""
    return f"hosts: {counts}{stopped}"


class _Live:
    """The live table; `log` prints a line above it and redraws it."""

    def __init__(self, state: st.RolloutState, console: Console) -> None:
        self.state = state
        # redrawn by rich's own thread too, so "for" keeps counting while a deploy runs
        self.live = Live(console=console, refresh_per_second=2, get_renderable=self._render)

    def _render(self) -> Group:
        return Group(host_table(self.state), Text(counts_line(self.state)))

    def log(self, line: str) -> None:
        self.live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self.live.refresh()


@contextmanager
def display(state: st.RolloutState, console: Console, quiet: bool = False) -> Iterator[Log]:
    """The log callable for `Rollout`: the live table on a terminal, plain lines elsewhere,
    nothing with ``quiet`` (-q; the summary at the end stays)."""
    if quiet:
        yield lambda line: None
        return
    if not console.is_terminal:
        yield lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    shown = _Live(state, console)
    with shown.live:
        yield shown.log
