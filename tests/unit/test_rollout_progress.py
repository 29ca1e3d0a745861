"""The rollout's live display: a redrawn host table on a terminal, plain lines in a pipe."""

from __future__ import annotations

import io

from rich.console import Console

from gpufleet.rollout import progress
from gpufleet.rollout import state as st


def a_rollout() -> st.RolloutState:
    hosts = {n: st.HostRecord(n) for n in ("gpu-a", "gpu-b", "gpu-c")}
    hosts["gpu-a"].state, hosts["gpu-a"].history = "done", [(100.0, "done")]
    hosts["gpu-b"].state, hosts["gpu-b"].history = "deploying", [(100.0, "deploying")]
    return st.RolloutState(hosts)


def test_the_table_shows_each_host_its_state_and_time_in_it() -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(progress.host_table(a_rollout(), now=142.0))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "gpu-" in line}
    assert "deploying" in rows["gpu-b"] and "42 s" in rows["gpu-b"]
    assert "done" in rows["gpu-a"] and " s " not in rows["gpu-a"]  # a final state has no clock
    assert "pending" in rows["gpu-c"]
    assert progress.counts_line(a_rollout()) == "hosts: 1 pending, 1 deploying, 1 done"


def test_on_a_terminal_each_line_is_printed_above_a_redrawn_table() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    state = a_rollout()
    with progress.display(state, console) as log:
        state.hosts["gpu-b"].state = "rebooting"
        log("gpu-b                rebooting")
    text = out.getvalue()
    assert "gpu-b                rebooting" in text
    assert text.count("gpufleet rollout") >= 2  # drawn, then drawn again after the line
    assert "\x1b[" in text  # cursor movements: the table is redrawn in place
    assert "hosts: 1 pending, 1 rebooting, 1 done" in text


def test_in_a_pipe_only_the_lines_are_printed() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    with progress.display(a_rollout(), console) as log:
        log("gpu-b                validating")
        log("gpu-b                failed: gpufleet: rollout: validation failed: [x] y")
    assert out.getvalue().splitlines() == [
        "gpu-b                validating",
        "gpu-b                failed: gpufleet: rollout: validation failed: [x] y",
    ]
