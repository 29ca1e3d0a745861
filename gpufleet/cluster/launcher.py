"""Commands on the group's hosts over SSH: one-shot, background (tracked), and their clean-up.

Every background command of a run writes its PID into a directory made for the run
(``/tmp/gpufleet-cluster-<run id>``, mode 700, refused if it already exists), so the clean-up
can end exactly what this run started on each host (its process group, then the process) and
nothing else, and then check that nothing is left: no such process, no listener on the ports.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.cluster import srun
from gpufleet.cluster.config import IPERF3_PORT, WORKER_PS_PATTERN, ClusterHost, plain_run_id

# ssh options on top of the generated ssh_config: one connection per host for the whole run.
MUX = ["-o", "ControlMaster=auto", "-o", "ControlPersist=120", "-o", "ConnectTimeout=10"]
# Seconds a process gets between SIGTERM and SIGKILL.
TERM_GRACE_S = 3


def run_dir(run_id: str) -> str:
    """The run's directory on every host: ``/tmp/gpufleet-cluster-20261201T120000Z-abc123``."""
    return f"/tmp/gpufleet-cluster-{plain_run_id(run_id)}"


def env_prefix(env: Mapping[str, str]) -> str:
    """``env K='v' ...`` for a remote shell; names are checked, values quoted."""
    for name in env:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            raise ValueError(f"environment name {name!r} is not plain")
    return "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) if env else ""


def background_script(
    directory: str, label: str, argv: Sequence[str], env: Mapping[str, str]
) -> str:
    """A shell line that records its PID as ``<dir>/<label>.pid`` and runs ``argv``.

    The shell sshd starts is a session (and process group) leader, so the PID file names the
    process group the clean-up ends. The shell stays, so a command killed by a signal still
    reports 128 + the signal (ssh reports a killed session as 255, the same as its own errors).
    """
    if not re.fullmatch(r"[a-z0-9-]{1,32}", label):
        raise ValueError(f"label {label!r} is not plain")
    d = shlex.quote(directory)
    command = " ".join(shlex.quote(a) for a in argv)
    return (
        f"(mkdir -m 700 {d} 2>/dev/null || [ -d {d} -a -O {d} ]) && echo $$ > {d}/{label}.pid "
        f"&& {env_prefix(env)} {command}; exit $?"
    )


@dataclass
class Remote:
    """A command running on a host through a local ``ssh`` process."""

    host: ClusterHost
    label: str
    proc: subprocess.Popen[str]
    started: float = field(default_factory=time.monotonic)

    def finished(self) -> bool:
        return self.proc.poll() is not None

    def wait(self, timeout: float) -> tuple[int | None, str, str]:
        """(exit status or None on timeout, stdout, stderr)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "", ""
        return self.proc.returncode, out, err


@dataclass
class Launcher:
    """Runs commands on hosts through the run's generated ssh_config (``gpufleet.validate.ssh``)."""

    ssh_config: Path
    run_id: str
    started: list[Remote] = field(default_factory=list)
    # How the leftover check lists a host's processes ("PID ARGS" per line).
    processes: str = "ps -eo pid=,args="

    @property
    def directory(self) -> str:
        return run_dir(self.run_id)

    def _ssh(self, host: ClusterHost, script: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), *MUX, host.alias, script]

    def run(
        self, host: ClusterHost, script: str, timeout: float = 60, stdin: str = ""
    ) -> tuple[int, str, str]:
        """Run a shell line on the host; (status, stdout, stderr); 124 on timeout, 255 ssh."""
        try:
            proc = subprocess.run(
                self._ssh(host, script),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return 124, "", f"no answer within {timeout:.0f} s"
        return proc.returncode, proc.stdout, proc.stderr

    def start(
        self,
        host: ClusterHost,
        label: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
    ) -> Remote:
        """Start ``argv`` on the host in the background (tracked for the clean-up)."""
        script = background_script(self.directory, label, argv, env or {})
        proc = subprocess.Popen(
            self._ssh(host, script),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        remote = Remote(host, label, proc)
        self.started.append(remote)
        return remote

    def stop(self, host: ClusterHost, label: str) -> None:
        """End what ``start`` began on the host under ``label`` (group, then process)."""
        pidfile = shlex.quote(f"{self.directory}/{label}.pid")
        self.run(host, kill_script(pidfile), timeout=TERM_GRACE_S + 30)

    def cleanup(self, hosts: Sequence[ClusterHost], ports: Sequence[int] = ()) -> dict[str, str]:
        """End everything this run started on every host, remove the run's directory, and say
        per host what is left: ``"clean"`` or what still runs or listens."""
        left: dict[str, str] = {}
        d = shlex.quote(self.directory)
        for host in hosts:
            # an srun job can outlive its killed srun for a moment: cancel and wait for it
            cancel = f"; {srun.cancel_script(self.run_id)}" if host.slurm else ""
            script = (
                f'if [ -d {d} ]; then for f in {d}/*.pid; do [ -f "$f" ] || continue; '
                f"{kill_script(chr(34) + '$f' + chr(34))}; done; rm -rf {d}; fi" + cancel
            )
            self.run(host, script, timeout=TERM_GRACE_S + 60)
        # This run's own ssh clients end before anything is looked for: on a control node that
        # is also a host, a client still exiting would read as a process left behind.
        for remote in self.started:
            if remote.proc.poll() is None:
                remote.proc.kill()
            remote.proc.wait()
        for host in hosts:
            script = leftover_script(
                sorted({host.worker_port, IPERF3_PORT, *ports}), processes=self.processes
            )
            status, out, err = self.run(host, script, timeout=TERM_GRACE_S + 60)
            if status == 0 and not out.strip():
                left[host.name] = "clean"
            elif status == 0:
                left[host.name] = "left: " + " ".join(out.split())[:300]
            else:
                left[host.name] = f"clean-up could not run (exit {status}): {err.strip()[:200]}"
        for remote in self.started:  # the local ssh ends once its remote command has
            if remote.proc.poll() is None:
                remote.proc.kill()
            try:
                remote.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a pipe still held open by a remote survivor
                for pipe in (remote.proc.stdout, remote.proc.stderr):
                    if pipe is not None:
                        pipe.close()
        return left

    def close(self, hosts: Sequence[ClusterHost]) -> None:
        for host in hosts:
            subprocess.run(
                ["ssh", "-F", str(self.ssh_config), "-O", "exit", host.alias],
                capture_output=True,
                timeout=10,
                check=False,
            )


def kill_script(pidfile: str) -> str:
    """SIGTERM the process group in ``pidfile``, SIGKILL what outlives the grace time (TF
    catches SIGTERM), then wait until the group is gone: a killed process holds its ports
    until the kernel has torn it down. ``pidfile`` is already quoted for the shell."""
    alive = "kill -s 0 -- -$p 2>/dev/null || kill -s 0 $p 2>/dev/null"
    return (
        f"p=$(cat {pidfile} 2>/dev/null); case \"$p\" in ''|*[!0-9]*) ;; *) "
        f"kill -s TERM -- -$p 2>/dev/null; kill -s TERM $p 2>/dev/null; "
        f"i=0; while {{ {alive}; }} && [ $i -lt {TERM_GRACE_S * 10} ]; do sleep 0.1; "
        f"i=$((i+1)); done; kill -s KILL -- -$p 2>/dev/null; kill -s KILL $p 2>/dev/null; "
        f"i=0; while {{ {alive}; }} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done;; "
        f"esac; rm -f {pidfile}"
    )


def leftover_script(ports: Sequence[int], processes: str = "ps -eo pid=,args=") -> str:
    """Prints what of the tier still runs or listens (nothing when clean); ``processes`` is
    the shell command that lists the host's processes, one ``PID ARGS`` line each."""
    # the NCCL part's ranks too: on the hosts mpirun reaches over SSH they are orted's children,
    # not the run's PID files', so a survivor shows here (and makes the run an error)
    tools = f"{WORKER_PS_PATTERN}|[i]perf3 |[a]ll_reduce_perf"
    checks = [f"{{ {processes}; }} | grep -E '{tools}' | sed 's/^/process /'"]
    for port in ports:
        checks.append(f"ss -Htln 'sport = :{int(port)}' | sed 's/^/listening on {int(port)}: /'")
    return "; ".join(checks) + "; true"
