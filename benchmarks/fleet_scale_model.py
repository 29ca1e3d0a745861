"""The arithmetic of benchmarks/fleet_scale.py: /proc parsing, the per-host fit, the projection.

Pure functions (the tests in tests/unit/test_fleet_scale.py run them on canned /proc text).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PROJECTED = (100, 1_000, 5_000)
# The SSH pool of `gpufleet validate` without Slurm (gpufleet.validate.runner.MAX_PARALLEL).
VALIDATE_POOL = 64


@dataclass(frozen=True)
class Proc:
    """One process as /proc shows it: pid, parent, command name, RSS in KiB, open fds."""

    pid: int
    ppid: int
    comm: str
    rss_kib: int = 0
    fds: int = 0


def parse_stat(text: str) -> tuple[int, int, str]:
    """(pid, ppid, comm) from /proc/PID/stat; comm may hold spaces and parentheses."""
    head, _, rest = text.rpartition(") ")
    pid, _, comm = head.partition(" (")
    fields = rest.split()
    return int(pid), int(fields[1]), comm


def parse_rss_kib(status: str) -> int:
    """VmRSS in KiB from /proc/PID/status (0 for a kernel thread or a zombie)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(procs: Iterable[Proc], root: int) -> list[Proc]:
    """``root`` and every process below it."""
    children: dict[int, list[Proc]] = {}
    by_pid = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
        by_pid[proc.pid] = proc
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in by_pid:
            found.append(by_pid[pid])
        todo += [c.pid for c in children.get(pid, [])]
    return found


def ssh_sessions(tree: Sequence[Proc]) -> int:
    """Open SSH sessions: ssh client processes in the tree (a ControlMaster counts once)."""
    return sum(1 for p in tree if p.comm == "ssh")


@dataclass(frozen=True)
class Sample:
    """One command on N hosts: control-node CPU s, peak RSS MiB, peak SSH sessions and fds,
    wall s."""

    hosts: int
    cpu_s: float
    rss_mib: float
    ssh: int
    fds: int
    wall_s: float


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = fixed + per_host * N`` through ``(N, y)`` points."""
    if len(points) == 1:
        return 0.0, points[0][1] / max(points[0][0], 1)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0, mean_y / max(mean_x, 1)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    if slope < 0:
        # A cost cannot fall as hosts are added: on a few small N a falling fit is noise (the
        # first run's warm-up); project the largest measured figure as fixed instead.
        return max(ys), 0.0
    return mean_y - slope * mean_x, slope


@dataclass(frozen=True)
class Projection(Sample):
    """A command's projected cost on ``hosts`` hosts, and the limits it passes (none: one
    control process can hold it)."""

    limits: tuple[str, ...] = ()


def project(
    samples: Sequence[Sample],
    hosts: int,
    *,
    pool: int | None,
    fd_limit: int,
    cpus: int,
    memory_mib: float,
    sessions: int | None = None,
) -> Projection:
    """Fit each figure per host plus a fixed cost; time assumes ``pool`` hosts at once (None:
    every host at once, as pyinfra and Slurm do) and a host's own time from the 1-host run."""
    points = sorted(samples, key=lambda s: s.hosts)
    cpu = fit([(s.hosts, s.cpu_s) for s in points])
    rss = fit([(s.hosts, s.rss_mib) for s in points])
    fds = fit([(s.hosts, float(s.fds)) for s in points])
    ssh_per_host = max(s.ssh / s.hosts for s in points)
    # SSH sessions, open files and memory are held by the hosts served at once: the pool, or
    # ``sessions`` where the work runs everywhere at once but is gathered a few at a time
    # (Slurm jobs: gpufleet fetches at most --parallel results at once)
    limit = sessions if sessions is not None else pool
    at_once = hosts if limit is None else min(hosts, limit)
    one_host = points[0].wall_s
    waves = 1 if pool is None else math.ceil(hosts / pool)
    cpu_s = cpu[0] + cpu[1] * hosts
    # wall: the host's own time per wave, or the control node's CPU when that is longer
    wall_s = max(one_host * waves, cpu_s / max(cpus, 1))
    figure = Projection(
        hosts=hosts,
        cpu_s=cpu_s,
        # memory, like open files, is held by the hosts in flight at once (64 pytest
        # processes at most over SSH), not by the whole fleet
        rss_mib=rss[0] + rss[1] * at_once,
        ssh=math.ceil(ssh_per_host * at_once),
        fds=int(fds[0] + fds[1] * at_once),
        wall_s=wall_s,
    )
    limits = []
    if figure.fds > fd_limit:
        limits.append(f"open files {figure.fds} > ulimit -n {fd_limit}")
    if figure.rss_mib > memory_mib:
        limits.append(f"memory {figure.rss_mib:.0f} MiB > {memory_mib:.0f} MiB")
    if cpu_s / max(cpus, 1) > one_host * waves:
        limits.append(f"CPU-bound: {cpu_s:.0f} CPU s on {cpus} cores")
    return Projection(**{**figure.__dict__, "limits": tuple(limits)})


FORMULA = (
    "figure(N) = fixed + per_host * N, least squares over the measured N; SSH sessions = "
    "peak per host * hosts at once (the pool); open files likewise; wall(N) = max(one host's "
    "wall * ceil(N / pool), CPU s(N) / cores); pool: 64 for validate over SSH, every host for "
    "pyinfra (deploy, drift) and for Slurm jobs, whose results are gathered 64 at a time"
)


def report(
    command: str, samples: Sequence[Sample], projections: Mapping[int, Projection]
) -> list[str]:
    """The lines printed for one command: measured per host, then the projection."""
    lines = [f"{command}:"]
    for s in sorted(samples, key=lambda s: s.hosts):
        lines.append(
            f"  measured {s.hosts:>2} hosts: {s.cpu_s:6.1f} CPU s ({s.cpu_s / s.hosts:.2f}/host), "
            f"peak RSS {s.rss_mib:6.0f} MiB, peak SSH {s.ssh} ({s.ssh / s.hosts:.1f}/host), "
            f"fds {s.fds}, wall {s.wall_s:.1f} s"
        )
    for hosts, p in sorted(projections.items()):
        limit = "; ".join(p.limits) or "one control process holds it"
        lines.append(
            f"  projected {hosts:>5} hosts: {p.cpu_s:8.0f} CPU s, {p.rss_mib:7.0f} MiB, "
            f"{p.ssh} SSH, {p.fds} fds, wall {p.wall_s / 60:.1f} min ({limit})"
        )
    return lines
