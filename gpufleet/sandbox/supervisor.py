"""One host's supervisor: boots it with systemd-nspawn and boots it again when it reboots.

systemd-nspawn exits with status 133 when the container asks to be rebooted (`systemctl reboot`,
pyinfra's `server.reboot`); the supervisor starts it again, so a reboot from inside really comes
back. SIGTERM to the supervisor shuts the host down cleanly (SIGTERM to systemd-nspawn makes the
container's systemd power off) and then exits. Run as::

    python -m gpufleet.sandbox.supervisor --name gfsb-h1 --root ROOT --pid-file NSPAWN_PID_FILE
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from gpufleet.sandbox import cgroups, leader, pci_record
from gpufleet.sandbox.network import NETNS_DIR

CLONE_NEWTIME = 0x80  # <linux/sched.h>; time namespaces since Linux 5.6
REBOOT_STATUS = 133  # systemd-nspawn(1): "the container requested a reboot"
SHUTDOWN_TIMEOUT_S = 30.0
# A host that asks to reboot this often within a minute is broken; stop instead of spinning.
MAX_REBOOTS_PER_MINUTE = 10


def nspawn_command(name: str, root: Path, pci_devices: Path | None = None) -> list[str]:
    """systemd-nspawn booting `root` with systemd as PID 1 inside network namespace `name`.

    The host's root keeps CAP_NET_ADMIN, as a server's root has: it acts on the host's own
    network namespace only, and the cluster tier needs it to add its nftables table. (nspawn
    grants it with --private-network, but not with --network-namespace-path.)
    `pci_devices` (a recorded listing's tree, pci_record.py) is mounted read-only over the
    host's /sys/bus/pci/devices: nspawn binds it after mounting the container's /sys."""
    bind = [f"--bind-ro={pci_devices}:{pci_record.MOUNT_POINT}"] if pci_devices else []
    return [
        "systemd-nspawn",
        f"--directory={root}",
        f"--machine={name}",
        "--register=no",
        "--keep-unit",
        f"--network-namespace-path={NETNS_DIR / name}",
        "--capability=CAP_NET_ADMIN",
        "--link-journal=no",
        "--console=read-only",
        *bind,
        "--boot",
    ]


def fresh_boot_clock() -> None:
    """Give the container a boot clock that starts at zero at each boot.

    Runs in the child between fork and exec: it asks for a new time namespace for its own
    children (the container that systemd-nspawn starts) with CLOCK_BOOTTIME moved back by this
    machine's uptime. Inside, /proc/uptime then restarts on every boot, as on a real server;
    pyinfra's server.reboot waits for exactly that to tell that a host has rebooted.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWTIME) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWTIME) failed")
    with open("/proc/uptime") as uptime:
        seconds = int(float(uptime.read().split()[0]))
    with open("/proc/self/timens_offsets", "w") as offsets:
        offsets.write(f"boottime -{seconds} 0\n")


class Supervisor:
    """Keeps one host's systemd-nspawn running across reboots until told to stop."""

    def __init__(self, name: str, root: Path, pid_file: Path) -> None:
        self.name = name
        self.root = root
        self.pid_file = pid_file
        # The container's own init, recorded beside nspawn's PID at each boot: it outlives a
        # killed nspawn, so `status`, `stop` and `down` look for it.
        self.leader_file = pid_file.with_name(leader.LEADER_FILE)
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping_since: float | None = None
        # What runs in systemd-nspawn's process before exec (tests replace it).
        self.preexec: Callable[[], None] | None = self.before_exec
        self.cgroups: list[Path] = []

    def before_exec(self) -> None:
        """In nspawn's process: its own cgroups (see cgroups.py), a fresh boot clock."""
        cgroups.join(self.cgroups)
        fresh_boot_clock()

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        # Only note the time: the polling loop forwards it, whatever state the child is in.
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()

    def boot_once(self) -> int:
        """Run systemd-nspawn until it exits; kill it if a shutdown overruns the timeout."""
        if self.preexec == self.before_exec:
            self.cgroups = cgroups.prepare(self.name)
            if not self.cgroups:
                log(f"{self.name}: no cgroup of its own could be made; booting in this one")
        self.child = subprocess.Popen(
            nspawn_command(self.name, self.root, pci_record.tree_of(self.root)),
            stdin=subprocess.DEVNULL,
            preexec_fn=self.preexec,
        )
        self.pid_file.write_text(f"{self.child.pid}\n")
        self.leader_file.unlink(missing_ok=True)
        forwarded = False
        leader_seen = False
        while (status := self.child.poll()) is None:
            if not leader_seen and (found := leader.container_leader(self.child.pid)):
                leader.record(self.leader_file, found)
                leader_seen = True
            if self.stopping_since is not None and not forwarded:
                self.child.send_signal(signal.SIGTERM)  # the container's systemd powers off
                forwarded = True
            overdue = (
                self.stopping_since is not None
                and time.monotonic() - self.stopping_since > SHUTDOWN_TIMEOUT_S
            )
            if overdue:
                log(f"{self.name}: no clean shutdown within {SHUTDOWN_TIMEOUT_S:.0f} s; killing")
                self.child.kill()
            time.sleep(0.2)
        return status

    def run(self) -> int:
        reboots: list[float] = []
        while self.stopping_since is None:
            status = self.boot_once()
            if self.stopping_since is not None:
                return 0
            if status != REBOOT_STATUS:
                log(f"{self.name}: systemd-nspawn exited with status {status}; host is down")
                return status
            now = time.monotonic()
            reboots = [t for t in reboots if now - t < 60] + [now]
            if len(reboots) > MAX_REBOOTS_PER_MINUTE:
                log(f"{self.name}: over {MAX_REBOOTS_PER_MINUTE} reboots in a minute; giving up")
                return 1
            log(f"{self.name}: rebooted from inside; booting it again")
        return 0


def log(message: str) -> None:
    print(f"[gpufleet-sandbox supervisor {time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--name", required=True, help="host name, also its network namespace")
    parser.add_argument("--root", required=True, type=Path, help="the host's root file system")
    parser.add_argument("--pid-file", required=True, type=Path, help="where to write nspawn's PID")
    args = parser.parse_args(argv)
    supervisor = Supervisor(args.name, args.root, args.pid_file)
    signal.signal(signal.SIGTERM, supervisor.on_sigterm)
    signal.signal(signal.SIGINT, supervisor.on_sigterm)
    log(f"{args.name}: booting {args.root}")
    status = supervisor.run()
    supervisor.pid_file.unlink(missing_ok=True)
    supervisor.leader_file.unlink(missing_ok=True)
    for path in supervisor.cgroups:
        cgroups.remove_tree(path)
    return status


if __name__ == "__main__":
    sys.exit(main())
