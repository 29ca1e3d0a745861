"""Helpers of the Slurm e2e tests: the controller's view of nodes, the rollout's state file."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.integration.conftest import Sandbox


def on_controller(cluster: Sandbox, command: str, timeout: float = 120) -> str:
    proc = cluster.ssh(0, command, timeout=timeout)
    assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"
    return proc.stdout


def node(cluster: Sandbox, name: str) -> tuple[str, str]:
    """(state, reason) of a node as the controller's sinfo says."""
    line = on_controller(cluster, f"sinfo -h -N -n {name} -o '%T|%E'").strip()
    state, _, reason = line.partition("|")
    return state, reason


def wait_for(cluster: Sandbox, name: str, want, timeout: float) -> tuple[tuple[str, str], float]:
    started = time.monotonic()
    seen = node(cluster, name)
    while not want(*seen) and time.monotonic() - started < timeout:
        time.sleep(1)
        seen = node(cluster, name)
    return seen, time.monotonic() - started


class Sampler:
    """sinfo every second on the controller: which nodes were out of service at once."""

    def __init__(self, cluster: Sandbox) -> None:
        self.cluster = cluster
        self.samples: list[list[str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from gpufleet.scheduler.rule import SINFO_FORMAT, parse_sinfo

        while not self.stop.is_set():
            proc = self.cluster.ssh(0, f"sinfo -h -N -o '{SINFO_FORMAT}'", timeout=10)
            if proc.returncode == 0:  # the controller itself reboots during its upgrade
                nodes = parse_sinfo(proc.stdout)
                self.samples.append(sorted(n.name for n in nodes.values() if n.out_of_service))
            time.sleep(1)

    def peak(self) -> int:
        self.stop.set()
        self.thread.join(15)
        return max((len(s) for s in self.samples), default=0)


def saved_states(tmp: Path) -> dict[str, str]:
    try:
        data = json.loads((tmp / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return {h["name"]: h["state"] for h in data["hosts"]}
