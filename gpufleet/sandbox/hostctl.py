"""One sandbox host at a time: its real state, and power off (clean or a cut) and on again."""

from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from gpufleet.sandbox import fleet, hosts, leader, network, procs
from gpufleet.sandbox.state import STATE_DIR, HostState, SandboxError, load_state, save_state

SSH_PORT = 22


def answers_ssh(address: str, timeout: float = 1.0) -> bool:
    """True when sshd on `address` sends its banner right now."""
    try:
        with socket.create_connection((address, SSH_PORT), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


@dataclass(frozen=True)
class HostStatus:
    """What is really running for one host, looked at on the machine and over the network."""

    name: str
    address: str
    supervisor_pid: int | None  # None: not running
    leader_pid: int | None  # the container's systemd; None: not running
    ssh: bool

    @property
    def word(self) -> str:
        """running, BOOTING, ORPHANED, UNTRACKED or STOPPED; one answering SSH is never STOPPED."""
        if self.leader_pid is not None and self.supervisor_pid is None:
            return "ORPHANED"
        if self.ssh:
            return "running" if self.supervisor_pid is not None else "UNTRACKED"
        if self.supervisor_pid is not None or self.leader_pid is not None:
            return "BOOTING"
        return "STOPPED"

    def describe(self) -> str:
        parts = [
            f"supervisor pid {self.supervisor_pid}" if self.supervisor_pid else "no supervisor",
            f"systemd pid {self.leader_pid}" if self.leader_pid else "no systemd",
            "answers SSH" if self.ssh else "no SSH",
        ]
        text = f"{self.name:10} {self.address:14} {self.word} ({', '.join(parts)})"
        if self.word == "ORPHANED":
            text += f"; its supervisor is gone: `gpufleet sandbox stop {self.name} --hard`"
        return text


def _leader_file(name: str, state_dir: Path) -> Path:
    return hosts.host_dir(name, state_dir) / leader.LEADER_FILE


def host_leader(host: HostState, state_dir: Path) -> int | None:
    """The host's live container leader: recorded by its supervisor, or found in its netns."""
    inodes = [host.netns_inode] if host.netns_inode is not None else []
    found = leader.leaders([_leader_file(host.name, state_dir)], inodes)
    return found[0] if found else None


def probe(host: HostState, state_dir: Path = STATE_DIR) -> HostStatus:
    supervisor = host.supervisor_pid
    if not procs.is_ours(supervisor, fleet.SUPERVISOR_MARKER):
        supervisor = None
    return HostStatus(
        host.name, host.address, supervisor, host_leader(host, state_dir), answers_ssh(host.address)
    )


def find_host(name: str, state_dir: Path = STATE_DIR) -> HostState:
    state = load_state(state_dir)
    for host in state.hosts:
        if host.name == name:
            return host
    names = ", ".join(h.name for h in state.hosts)
    raise SandboxError(f"no host {name!r} in this sandbox; its hosts are: {names}")


def _set_supervisor(name: str, pid: int | None, state_dir: Path) -> None:
    state = load_state(state_dir)
    for host in state.hosts:
        if host.name == name:
            host.supervisor_pid = pid
    save_state(state, state_dir)


def _wait_empty(host: HostState, timeout: float) -> None:
    """Wait until no process is left in the host's network namespace (they die after its
    init, not with it)."""
    deadline = time.monotonic() + timeout
    while host.netns_inode is not None and time.monotonic() < deadline:
        if not leader.netns_processes(host.netns_inode):
            return
        time.sleep(0.1)


def stop(name: str, *, hard: bool = False, state_dir: Path = STATE_DIR) -> HostStatus:
    """Power a host off and return what is left (STOPPED). Clean: its systemd shuts down.
    Hard: a power cut, the supervisor, systemd-nspawn and the container's systemd killed at
    once. Its disk (the overlay) and network stay, so `start` boots it again."""
    with procs.exclusive(state_dir / ".lock", "sandbox"):
        host = find_host(name, state_dir)
        status = probe(host, state_dir)
        nspawn = procs.read_pid(hosts.host_dir(name, state_dir) / "nspawn.pid")
        if hard:
            if status.supervisor_pid is not None:  # first, so it cannot boot the host again
                procs.kill_and_wait([status.supervisor_pid])
            nspawn_pid = nspawn if procs.is_ours(nspawn, fleet.NSPAWN_MARKER) else None
            procs.kill_and_wait([p for p in (nspawn_pid, status.leader_pid) if p is not None])
        elif status.supervisor_pid is not None:
            procs.stop_pid(status.supervisor_pid, fleet.SUPERVISOR_MARKER, fleet.STOP_WAIT_S)
        elif status.leader_pid is not None:  # orphaned: ask its systemd to power off
            with suppress(ProcessLookupError):
                os.kill(status.leader_pid, signal.SIGRTMIN + 4)  # systemd(1): poweroff
            if not procs.wait_gone(status.leader_pid, fleet.STOP_WAIT_S):
                procs.kill_and_wait([status.leader_pid])
        _set_supervisor(name, None, state_dir)
        _wait_empty(host, fleet.STOP_WAIT_S)
        after = probe(find_host(name, state_dir), state_dir)
        if after.leader_pid is not None or after.ssh:
            raise SandboxError(f"{name} is still running after stop: {after.describe()}")
        return after


def start(
    name: str, *, state_dir: Path = STATE_DIR, wait_s: float = fleet.SSH_WAIT_S
) -> HostStatus:
    """Power a stopped host on from its kept disk and wait until it answers SSH."""
    with procs.exclusive(state_dir / ".lock", "sandbox"):
        host = find_host(name, state_dir)
        status = probe(host, state_dir)
        if status.word != "STOPPED":
            raise SandboxError(
                f"{name} is not stopped: {status.describe()}. "
                f"Fix: `gpufleet sandbox stop {name}` (or --hard) first"
            )
        root = hosts.host_root(name, state_dir)
        if not os.path.ismount(root) or name not in network.named_namespaces():
            raise SandboxError(
                f"{name}'s disk or network is gone ({root}, netns {name}); "
                "bring the fleet up again with `gpufleet sandbox up`"
            )
        pid = fleet.start_supervisor(name, state_dir)
        _set_supervisor(name, pid, state_dir)
        if not fleet.wait_for_ssh(host.address, time.monotonic() + wait_s):
            raise SandboxError(
                f"{name} did not answer SSH within {wait_s:.0f} s; "
                f"see {state_dir / 'log' / name}.log"
            )
        return probe(find_host(name, state_dir), state_dir)
