"""No scheduler (`--scheduler none`): the rollout's state machine without drain or resume, or
with the operator's own commands for them (e.g. ``kubectl cordon {host}``)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence

from gpufleet.scheduler.rule import SchedulerError, check_node_name

HOOK_TIMEOUT_S = 120


class NoScheduler:
    """Drain and resume run the operator's commands, if any; no jobs are ever seen running.

    ``{host}`` in a command is replaced by the host's name, as one argument; the command is
    split like a shell would (shlex) but run without one.
    Example: ``NoScheduler("kubectl cordon {host}", "kubectl uncordon {host}")``
    """

    name = "none"

    def __init__(self, cordon: str | None = None, uncordon: str | None = None) -> None:
        self.cordon, self.uncordon = cordon, uncordon

    def _hook(self, template: str | None, name: str) -> None:
        if not template:
            return
        argv = [part.replace("{host}", check_node_name(name)) for part in shlex.split(template)]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=HOOK_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SchedulerError(f"`{shlex.join(argv)}` could not run: {exc}") from None
        if proc.returncode != 0:
            raise SchedulerError(
                f"`{shlex.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()[:300]}"
            )

    def out_of_service(self, names: Sequence[str] = ()) -> dict[str, str]:
        return {}

    def drain(self, name: str, reason: str) -> None:
        self._hook(self.cordon, name)

    def resume(self, name: str) -> None:
        self._hook(self.uncordon, name)

    def running_jobs(self, name: str) -> list[str]:
        return []
