"""A real Slurm cluster on the sandbox hosts (`sandbox up --slurm`): munge, slurmctld, slurmd.

The first host runs slurmctld and is also a compute node; every host runs munge and slurmd.
Packages come from the distribution's archive through the sandbox's apt proxy; the
configuration is pushed (no configless mode): the same slurm.conf, gres.conf and munge key
on every host, written into each host's root from this machine before the install.
"""

from __future__ import annotations

import os
import secrets
import shlex
import stat
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpufleet.operations import apt_bounded
from gpufleet.sandbox import hosts
from gpufleet.sandbox.state import STATE_DIR, HostState, SandboxError, SandboxState

Log = Callable[[str], None]
CLUSTER = "gfsb"
PARTITION = "gpu"
# GPUs each host declares to Slurm. Sandbox hosts have none on their PCI bus, and Slurm 21.08+
# drops a file-less GPU from the node's GRES ("Ignoring file-less GPU"), so the node registers
# with 0 < 2 GPUs and lands in INVAL. Stand-in character devices with the NVIDIA major (195)
# give gres.conf its File=; slurmd only stat()s them (task/none binds no devices). They live
# outside /dev, which systemd-nspawn replaces with its own tmpfs.
SANDBOX_GPUS = 2
GPU_DEV_DIR = "/var/lib/gpufleet-sandbox-gpus"
NVIDIA_MAJOR = 195
# CPUs each node offers: enough for a job beside a validation run, few enough that a test can
# fill a node with one job.
SANDBOX_CPUS = 2
# The health check interval the sandbox cluster starts with; the deploy's
# scheduler_integration stage sets its own (slurm_health_interval).
PACKAGES = ("munge", "slurmd", "slurm-client")
CONTROLLER_PACKAGES = ("slurmctld",)
STAGED_KEY = "/root/.gpufleet-munge.key"
INSTALL_TIMEOUT_S = 600
# apt on the hosts, bounded as the deploy bounds it (gpufleet.operations.apt_bounded): a request
# silent this long fails, the whole update is killed at UPDATE_FACTOR times that, and the update
# is tried twice. apt-cacher-ng fails concurrent refreshes of one InRelease ("Failure to move
# file ... out of the way", seen with 6 hosts at once) and the losing client waited until
# INSTALL_TIMEOUT_S; `setup` also lets the controller refresh the proxy's index files alone
# first, so the others are served its frozen copy.
APT_REQUEST_TIMEOUT_S = 30
APT_UPDATE_TIMEOUT_S = APT_REQUEST_TIMEOUT_S * apt_bounded.UPDATE_FACTOR
APT_LOG = "/root/.gpufleet-slurm-apt.log"
READY_TIMEOUT_S = 90


def controller(state: SandboxState) -> HostState:
    """The host that runs slurmctld: the first one."""
    if not state.hosts:
        raise SandboxError("the sandbox has no hosts to run Slurm on")
    return state.hosts[0]


def slurm_conf(state: SandboxState) -> str:
    """slurm.conf, the same on every host."""
    ctl = controller(state)
    lines = [
        "# gpufleet sandbox cluster (gpufleet/sandbox/slurm.py); pushed to every host",
        f"ClusterName={CLUSTER}",
        f"SlurmctldHost={ctl.name}({ctl.address})",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        # nspawn hosts share this machine's cgroup tree, which slurmd may not manage: track
        # processes by parent PID and bind no tasks (Slurm's man page: linuxproc can lose
        # processes that daemonise, acceptable for test jobs).
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # A node that was DOWN (a reboot) comes back by itself when slurmd registers;
        # a DRAINED one stays drained until someone resumes it.
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "GresTypes=gpu",
        "# gpufleet: health check lines below are managed by the scheduler_integration stage",
    ]
    for host in state.hosts:
        lines.append(
            f"NodeName={host.name} NodeAddr={host.address} CPUs={SANDBOX_CPUS} "
            f"Gres=gpu:{SANDBOX_GPUS} State=UNKNOWN"
        )
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def gres_conf(state: SandboxState) -> str:
    """gres.conf naming the stand-in GPU devices (the hosts have no /dev/nvidia*)."""
    names = ",".join(host.name for host in state.hosts)
    files = f"{GPU_DEV_DIR}/nvidia[0-{SANDBOX_GPUS - 1}]"
    return (
        "# gpufleet sandbox: stand-in GPU device nodes (no GPU on the PCI bus)\n"
        f"NodeName={names} Name=gpu File={files}\n"
    )


def etc_hosts(state: SandboxState, own: HostState) -> str:
    """/etc/hosts naming every host, so that slurmd and srun resolve each other."""
    lines = ["127.0.0.1 localhost", f"127.0.1.1 {own.name}"]
    lines += [f"{host.address} {host.name}" for host in state.hosts]
    lines.append("::1 localhost ip6-localhost ip6-loopback")
    return "\n".join(lines) + "\n"


def munge_key(state_dir: Path = STATE_DIR) -> Path:
    """The cluster's munge key (1 KiB random, mode 600), made once per sandbox state dir."""
    path = state_dir / "slurm" / "munge.key"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_bytes(secrets.token_bytes(1024))
        tmp.replace(path)
    return path


def install_script(is_controller: bool) -> str:
    """What runs on a host as root: install, put the key in place, (re)start the daemons."""
    packages = " ".join(PACKAGES + (CONTROLLER_PACKAGES if is_controller else ()))
    steps = [
        "set -e",
        "export DEBIAN_FRONTEND=noninteractive",
        "for try in 1 2; do",
        f"  if sh -c {shlex.quote(apt_bounded.UPDATE)} gpufleet-apt-update"
        f" {APT_REQUEST_TIMEOUT_S} {APT_UPDATE_TIMEOUT_S} >{APT_LOG} 2>&1; then break; fi",
        f'  [ "$try" = 2 ] && {{ tail -n 5 {APT_LOG};'
        ' echo "apt-get update through the sandbox proxy failed twice"; exit 1; }',
        "done",
        f"apt-get install -y -q --no-install-recommends {packages} >/dev/null",
        f"install -o munge -g munge -m 400 {STAGED_KEY} /etc/munge/munge.key",
        f"rm -f {STAGED_KEY}",
        "install -d -o slurm -g slurm /var/lib/slurm/slurmd /var/log/slurm",
        "systemctl restart munge",
    ]
    if is_controller:
        steps += [
            "install -d -o slurm -g slurm /var/lib/slurm/slurmctld",
            "systemctl enable slurmctld >/dev/null 2>&1",
            "systemctl restart slurmctld",
        ]
    steps += ["systemctl enable slurmd >/dev/null 2>&1", "systemctl restart slurmd"]
    return "\n".join(steps) + "\n"


def ssh_command(host: HostState, state_dir: Path, command: str) -> list[str]:
    """ssh as root to a sandbox host, its host key checked strictly."""
    return [
        "ssh",
        "-i",
        str(hosts.client_key(state_dir)),
        "-o",
        f"UserKnownHostsFile={hosts.known_hosts_file(state_dir)}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        f"root@{host.address}",
        command,
    ]


def run_on(
    host: HostState, command: str, state_dir: Path = STATE_DIR, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a shell command on a sandbox host as root."""
    return subprocess.run(
        ssh_command(host, state_dir, command), capture_output=True, text=True, timeout=timeout
    )


def push_files(state: SandboxState, state_dir: Path) -> None:
    """Write the configuration and the staged munge key into every host's root."""
    key = munge_key(state_dir).read_bytes()
    for host in state.hosts:
        root = hosts.host_root(host.name, state_dir)
        (root / "etc/slurm").mkdir(parents=True, exist_ok=True)
        (root / "etc/slurm/slurm.conf").write_text(slurm_conf(state))
        (root / "etc/slurm/gres.conf").write_text(gres_conf(state))
        (root / "etc/hosts").write_text(etc_hosts(state, host))
        devices = root / GPU_DEV_DIR.lstrip("/")
        devices.mkdir(parents=True, exist_ok=True)
        for index in range(SANDBOX_GPUS):
            node = devices / f"nvidia{index}"
            if not node.exists():
                os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, index))
        staged = root / STAGED_KEY.lstrip("/")
        staged.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        staged.touch(mode=0o600)
        staged.write_bytes(key)


def _install(host: HostState, is_controller: bool, state_dir: Path) -> str | None:
    try:
        proc = run_on(host, install_script(is_controller), state_dir, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return (
            f"{host.name}: installing Slurm did not finish within {INSTALL_TIMEOUT_S} s (apt "
            f"through the sandbox proxy? see {state_dir / 'log' / 'apt-cacher-ng'})"
        )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        return f"{host.name}: installing Slurm failed (exit {proc.returncode}):\n{tail}"
    return None


def node_states(state: SandboxState, state_dir: Path = STATE_DIR) -> dict[str, str]:
    """``{node: state}`` as the controller's sinfo reports it (e.g. ``idle``, ``drained``)."""
    proc = run_on(controller(state), "sinfo -h -N -o '%N %T'", state_dir, timeout=30)
    if proc.returncode != 0:
        return {}
    states = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_ready(state: SandboxState, state_dir: Path, timeout: float = READY_TIMEOUT_S) -> None:
    """Wait until every node is idle (registered, no job, not drained)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = node_states(state, state_dir)
        if len(seen) == len(state.hosts) and all(s == "idle" for s in seen.values()):
            return
        time.sleep(1.0)
    errors = run_on(
        controller(state),
        "grep -hiE 'error|invalid' /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log "
        "| tail -n 12; sinfo -h -N -o '%N %T %E'",
        state_dir,
    ).stdout.strip()
    raise SandboxError(
        f"Slurm nodes not idle within {timeout:.0f} s (sinfo: {seen or 'no answer'}); the "
        f"controller's logs say:\n{errors}"
    )


def setup(state: SandboxState, state_dir: Path = STATE_DIR, log: Log = print) -> None:
    """Install and start the cluster on every host in parallel; return once all nodes are idle."""
    started = time.monotonic()
    push_files(state, state_dir)
    ctl = controller(state)
    # The controller first, alone: its apt-get update refreshes the proxy's index files,
    # which the other hosts, in parallel, then get from its cache (FreshIndexMaxAge).
    errors = [_install(ctl, True, state_dir)]
    others = [h for h in state.hosts if h.name != ctl.name]
    if others and not errors[0]:
        with ThreadPoolExecutor(max_workers=len(others)) as pool:
            errors += pool.map(lambda h: _install(h, False, state_dir), others)
    failed = [e for e in errors if e]
    if failed:
        raise SandboxError("\n".join(failed))
    wait_ready(state, state_dir)
    state.slurm_controller = ctl.address
    state.notes.append(f"Slurm cluster {CLUSTER}: slurmctld on {ctl.name}, slurmd on every host")
    log(f"Slurm up in {time.monotonic() - started:.1f} s: controller {ctl.name} ({ctl.address})")
