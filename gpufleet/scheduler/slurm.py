"""Slurm through its own commands (sinfo, squeue, scontrol), run locally or on a remote host.

`Runner` runs one argv and returns ``(exit status, output)``: `local_runner` on the node itself
(the health check), an SSH runner in gpufleet.scheduler.remote for validate and rollout. Every
argument is a plain argv element; a runner that needs a shell quotes each one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Collection, Sequence

from gpufleet.scheduler.rule import (
    SINFO_FORMAT,
    Action,
    NodeState,
    SchedulerError,
    check_node_name,
    decide,
    parse_sinfo,
)

Runner = Callable[[Sequence[str]], tuple[int, str]]
COMMAND_TIMEOUT_S = 20


def local_runner(argv: Sequence[str]) -> tuple[int, str]:
    """Run a Slurm command on this machine; output is stdout and stderr together."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found (is slurm-client installed?)"
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S} s"
    return proc.returncode, proc.stdout + proc.stderr


class Slurm:
    """Drain, resume and look at nodes; the drain/resume rule in `apply`.

    Example::

        slurm = Slurm(local_runner)
        slurm.apply("gpu07", ("persistence", "nvidia-persistenced is inactive"))
    """

    name = "slurm"

    def __init__(self, run: Runner) -> None:
        self._run = run

    def _call(self, argv: Sequence[str]) -> str:
        status, output = self._run(argv)
        if status != 0:
            raise SchedulerError(f"`{' '.join(argv)}` exited {status}: {output.strip()[:300]}")
        return output

    def nodes(self, names: Sequence[str] = ()) -> dict[str, NodeState]:
        """Every node (or those named) as sinfo reports it."""
        argv = ["sinfo", "-h", "-N", "-o", SINFO_FORMAT]
        if names:
            argv += ["-n", ",".join(check_node_name(n) for n in names)]
        return parse_sinfo(self._call(argv))

    def node(self, name: str) -> NodeState:
        found = self.nodes([name]).get(name)
        if found is None:
            raise SchedulerError(f"Slurm has no node {name!r} (sinfo -N lists it not)")
        return found

    def running_jobs(self, name: str) -> list[str]:
        """IDs of the jobs running (or completing) on the node."""
        out = self._call(
            ["squeue", "-h", "-w", check_node_name(name), "-t", "RUNNING,COMPLETING", "-o", "%i"]
        )
        return [line.strip() for line in out.splitlines() if line.strip()]

    def drain(self, name: str, reason: str) -> None:
        self._call(
            [
                "scontrol",
                "update",
                f"NodeName={check_node_name(name)}",
                "State=DRAIN",
                f"Reason={reason}",
            ]
        )

    def resume(self, name: str) -> None:
        """Return the node to service; a node already in service is left as it is.

        scontrol refuses RESUME on a node that is neither drained nor down ("Invalid node
        state specified"), which a rollout restarted right after its resume would hit.
        """
        node = self.node(name)
        if node.drained or node.state in ("down", "fail", "failing"):
            self._call(["scontrol", "update", f"NodeName={check_node_name(name)}", "State=RESUME"])

    def out_of_service(self, names: Sequence[str] = ()) -> dict[str, str]:
        """``{node: reason or state}`` for the nodes taking no new jobs now (``idle*``: the
        state with sinfo's suffix, so a node not responding says so)."""
        return {n.name: n.reason or n.shown for n in self.nodes(names).values() if n.out_of_service}

    def apply(
        self, name: str, failure: tuple[str, str] | None, passed: Collection[str] | None = None
    ) -> Action:
        """Decide by the rule (gpufleet.scheduler.rule.decide) and carry it out."""
        action = decide(self.node(name), failure, passed)
        if action.kind == "drain":
            self.drain(name, action.reason)
        elif action.kind == "resume":
            self.resume(name)
        return action
