"""Bringing the whole sandbox fleet up and down: network, apt proxy, stand-ins, hosts."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpufleet.sandbox import aptproxy, hosts, image, leader, network, ours, procs, supervisor
from gpufleet.sandbox import snapshot as snapshots
from gpufleet.sandbox.snapshot import SnapshotMeta
from gpufleet.sandbox.state import (
    CACHE_DIR,
    GATEWAY,
    HTTP_PORT,
    STATE_DIR,
    HostState,
    SandboxError,
    SandboxState,
    check_host_count,
    host_address,
    host_name,
    load_state,
    save_state,
    state_file,
)

if TYPE_CHECKING:
    from gpufleet.spec import NodeSpec

Log = Callable[[str], None]
REQUIRED_TOOLS = {
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "apt-cacher-ng": "apt-cacher-ng",
    "ip": "iproute2",
    "ssh-keygen": "openssh-client",
    "gpg": "gnupg",
}
SSH_WAIT_S = 60.0
# Longer than a supervisor's own shutdown timeout, after which it kills systemd-nspawn.
STOP_WAIT_S = supervisor.SHUTDOWN_TIMEOUT_S + 15
# Markers that identify our own processes in /proc/PID/cmdline before we signal a PID.
SUPERVISOR_MARKER = "gpufleet.sandbox.supervisor"
NSPAWN_MARKER = "systemd-nspawn"


def check_root() -> None:
    if os.geteuid() != 0:
        raise SandboxError("the sandbox needs root (network namespaces, mounts): run it with sudo")


def check_prerequisites() -> None:
    """Refuse to start unless root with every tool the sandbox needs."""
    check_root()
    missing = sorted({pkg for tool, pkg in REQUIRED_TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise SandboxError(f"missing tools: apt-get install -y {' '.join(missing)}")


# Each host's systemd, journald, logind and sshd hold inotify instances: measured here, 22 hosts
# came up under the default limit of 128 and the 23rd's systemd died "Too many open files".
INOTIFY_PER_HOST = 6
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def check_inotify(count: int, limit_file: Path = INOTIFY_LIMIT) -> None:
    """Refuse a fleet whose hosts' systemd would run out of inotify instances at boot."""
    try:
        limit = int(limit_file.read_text())
    except (OSError, ValueError):
        return  # no such knob here: nothing to check
    needed = count * INOTIFY_PER_HOST
    if limit < needed:
        raise SandboxError(
            f"{count} hosts need about {needed} inotify instances, but "
            f"fs.inotify.max_user_instances is {limit} (their systemd would fail with 'Too many "
            f"open files'). Fix: sysctl -w fs.inotify.max_user_instances={max(needed, 1024)}"
        )


def wait_for_ssh(address: str, deadline: float) -> bool:
    """True once sshd on `address` sends its banner (a bare TCP accept is not enough)."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=1.0) as conn:
                conn.settimeout(2.0)
                if conn.recv(4).startswith(b"SSH-"):
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def start_supervisor(name: str, state_dir: Path) -> int:
    """Power a prepared host on: start its supervisor, which boots it; return the PID."""
    command = [
        sys.executable,
        "-m",
        SUPERVISOR_MARKER,
        "--name",
        name,
        "--root",
        str(hosts.host_root(name, state_dir)),
        "--pid-file",
        str(hosts.host_dir(name, state_dir) / "nspawn.pid"),
    ]
    return procs.start_detached(command, state_dir / "log" / f"{name}.log")


def start_host(
    index: int, root_image: Path, state_dir: Path, layers: list[Path] | None = None, pci: str = ""
) -> HostState:
    """Give host `index` its network, root (over a snapshot's `layers`, if any), identity and
    PCI bus (recorded listing `pci`, if any), and start its supervisor."""
    name, address = host_name(index), host_address(index)
    network.create_host_network(name, address, network.owner_tag(state_dir))
    hosts.prepare_host(name, address, root_image, state_dir, layers or [], pci)
    return HostState(
        layers=[str(layer) for layer in layers or []],
        pci_record=pci,
        name=name,
        address=address,
        ssh_key=str(hosts.client_key(state_dir)),
        known_hosts=str(hosts.known_hosts_file(state_dir)),
        supervisor_pid=start_supervisor(name, state_dir),
        netns_inode=leader.netns_inode(network.NETNS_DIR / name),
    )


def host_inodes(state_dir: Path, state: SandboxState | None) -> list[int]:
    """The network namespaces of this sandbox's hosts: recorded ones, and tagged ones."""
    inodes = {host.netns_inode for host in state.hosts} if state is not None else set()
    for ns in network.sandbox_namespaces(network.owner_tag(state_dir)):
        inodes.add(leader.netns_inode(network.NETNS_DIR / ns))
    return sorted(inode for inode in inodes if inode is not None)


def container_leaders(state_dir: Path, state: SandboxState | None) -> list[int]:
    """Live leaders (systemd inside) of this sandbox's hosts, with or without a supervisor."""
    files = sorted((state_dir / "hosts").glob(f"*/{leader.LEADER_FILE}"))
    return leader.leaders(files, host_inodes(state_dir, state))


def container_processes_in(inodes: list[int]) -> list[int]:
    return sorted({pid for inode in inodes for pid in leader.netns_processes(inode)})


def container_processes(state_dir: Path, state: SandboxState | None) -> list[int]:
    """Every live process inside this sandbox's hosts' network namespaces."""
    return container_processes_in(host_inodes(state_dir, state))


def sandbox_spec(state: SandboxState) -> NodeSpec:
    """The NodeSpec every host of this sandbox gets from its group data (imported late, as
    the stand-ins are: `sandbox down` needs neither)."""
    from gpufleet.sandbox.inventory import group_data
    from gpufleet.spec import NodeSpec

    return NodeSpec.from_host_data(group_data(SandboxState(image=state.image, os=state.os)))


def wheelhouse_lock(state: SandboxState) -> str:
    """The hashed lock the deploy installs on a sandbox host (TensorFlow as the sandbox's group
    data names it for the image's OS): the wheelhouse serves exactly its files."""
    from gpufleet.matrix.locks import LockError, lock_text, tool_lock_text
    from gpufleet.matrix.os_python import OLD_VENV_PIP, os_key
    from gpufleet.stages.python_env import PIP_REQUIREMENT

    spec = sandbox_spec(state)
    try:
        text = lock_text(spec.tensorflow_package, spec.tf_version)
        if state.os and os_key(*state.os) in OLD_VENV_PIP:  # the venv's pip is upgraded first
            text += tool_lock_text(PIP_REQUIREMENT)
        return text
    except LockError as exc:
        raise SandboxError(str(exc)) from None


def start_standins(
    state: SandboxState, state_dir: Path, cache: Path, log: Log, kept: SnapshotMeta | None = None
) -> None:
    """Engineer B's stand-ins: the signed NVIDIA repository (the one `kept` with a snapshot,
    whose key its hosts trust, or a new one), the wheelhouse, the HTTP server."""
    from gpufleet import matrix
    from gpufleet.sandbox.serve import start_server
    from gpufleet.sandbox.standins import build_nvidia_repo
    from gpufleet.sandbox.wheelhouse import ensure_wheelhouse

    os_id, os_version = state.os
    www = state_dir / "www"
    repo_distro = matrix.nvidia_repo_distro(os_id, os_version)
    repo_arch = matrix.nvidia_repo_arch(os.uname().machine)
    started = time.monotonic()
    if kept is not None and kept.repo_key_path:
        key_path, fingerprint = snapshots.restore_standins(kept, www, state_dir)
        log(f"stand-in NVIDIA repository of snapshot {kept.name} served again")
    else:
        repo = build_nvidia_repo(
            www,
            repo_distro=repo_distro,
            repo_arch=repo_arch,
            kernel_release=state.kernel_release,
            tf_version=sandbox_spec(state).tf_version,
        )
        key_path, fingerprint = repo.key_file.relative_to(www).as_posix(), repo.fingerprint
        log(f"stand-in NVIDIA repository built in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    python_version = image.image_spec(state.image).python_version
    lock = wheelhouse_lock(state)
    ensure_wheelhouse(www, cache / "wheelhouse", python_version=python_version, lock_text=lock)
    log(f"wheelhouse ready in {time.monotonic() - started:.1f} s")
    state.pids["http_server"] = start_server(
        www, GATEWAY, HTTP_PORT, state_dir / "log" / "http-server.log"
    )
    save_state(state, state_dir)
    base = f"http://{GATEWAY}:{HTTP_PORT}"
    state.nvidia_repo_url = f"{base}/nvidia"
    state.nvidia_repo_key_url = f"{base}/{key_path}"
    state.nvidia_repo_key_fingerprint = fingerprint
    state.pip_index_url = f"{base}/simple"


def up(
    count: int,
    image_name: str | None = None,
    *,
    standins: bool = True,
    slurm: bool = False,
    from_snapshot: str | None = None,
    bare: Sequence[str] = (),
    pci_records: Mapping[str, str] | None = None,
    state_dir: Path = STATE_DIR,
    cache: Path = CACHE_DIR,
    log: Log = print,
) -> SandboxState:
    """Bring up `count` hosts (after cleaning up whatever a crash left), each on its disk in
    `from_snapshot` if kept there and not in `bare`, its bus from `pci_records`; the new state."""
    check_host_count(count)
    check_prerequisites()
    check_inotify(count)
    kept = snapshots.load(from_snapshot, state_dir) if from_snapshot else None
    if kept is not None:
        snapshots.check_usable(kept, image_name)
        image_name = kept.image
        kept.hosts = [name for name in kept.hosts if name not in bare]
    with procs.exclusive(state_dir / ".lock", "sandbox", log):
        return _up(count, image_name, standins, state_dir, cache, log, slurm, kept, pci_records)


def _up(
    count: int,
    image_name: str | None,
    standins: bool,
    state_dir: Path,
    cache: Path,
    log: Log,
    slurm: bool = False,
    kept: SnapshotMeta | None = None,
    pci: Mapping[str, str] | None = None,
) -> SandboxState:
    leftovers = _down(state_dir, lambda _m: None)
    if leftovers:
        log(f"cleaned up leftovers of an earlier sandbox: {', '.join(leftovers)}")
    if (remaining := container_processes(state_dir, None)) or state_file(state_dir).exists():
        raise SandboxError(
            f"the earlier sandbox could not be stopped: processes {remaining} still run inside "
            "its hosts; stop them by PID, then run `gpufleet sandbox down` and `up` again"
        )
    network.check_free(network.owner_tag(state_dir))
    spec = image.choose_image(image_name, log=log)
    root_image = image.ensure_image(spec, cache, log=log)
    started = time.monotonic()
    state = SandboxState(
        image=spec.name,
        os=[spec.os_id, spec.os_version],
        kernel_release=os.uname().release,
        snapshot=kept.name if kept else "",
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    save_state(state, state_dir)  # from here on, `down` can find and stop what we start
    try:
        hosts.ensure_client_key(state_dir)
        network.create_bridge(network.owner_tag(state_dir))
        state.pids["apt_proxy"] = aptproxy.start_apt_proxy(state_dir, cache)
        save_state(state, state_dir)
        for index in range(1, count + 1):
            layers = snapshots.layers_of(kept, host_name(index), state_dir) if kept else []
            record = (pci or {}).get(host_name(index), "")
            state.hosts.append(start_host(index, root_image, state_dir, layers, record))
            save_state(state, state_dir)
        hosts.known_hosts_file(state_dir).write_text(
            "".join(hosts.known_hosts_line(h.name, h.address, state_dir) for h in state.hosts)
        )
        deadline = time.monotonic() + SSH_WAIT_S
        for host in state.hosts:
            if not wait_for_ssh(host.address, deadline):
                raise SandboxError(
                    f"{host.name} ({host.address}) did not answer SSH within {SSH_WAIT_S:.0f} s; "
                    f"see {state_dir / 'log' / host.name}.log"
                )
        log(f"{count} host(s) up and answering SSH in {time.monotonic() - started:.1f} s")
        if standins:
            start_standins(state, state_dir, cache, log, kept)
        else:
            state.notes.append("started without stand-ins (--no-standins): hosts only")
        save_state(state, state_dir)
        if slurm:
            from gpufleet.sandbox import slurm as sandbox_slurm

            sandbox_slurm.setup(state, state_dir, log)
            save_state(state, state_dir)
    except BaseException:
        _down(state_dir, log)
        raise
    return state


def down(*, state_dir: Path = STATE_DIR, log: Log = print) -> list[str]:
    """Stop everything the sandbox started, by PID, and remove its mounts, namespaces and links.

    Works from state.json when there is one, and from what this sandbox left on the machine
    when a crash lost it: PID files and mounts under the state directory, namespaces and links
    tagged with it, processes started with its paths. Another sandbox's are never touched.
    Returns what it stopped or removed.
    """
    with procs.exclusive(state_dir / ".lock", "sandbox", log):
        return _down(state_dir, log)


def _down(state_dir: Path, log: Log) -> list[str]:
    stopped: list[str] = []
    try:
        state: SandboxState | None = load_state(state_dir)
    except SandboxError:
        state = None
    if state is not None:
        # Supervisors first: each shuts its host down cleanly and exits; all hosts at once.
        supervisors = [(host.supervisor_pid, SUPERVISOR_MARKER) for host in state.hosts]
        stopped += [f"host supervisor {pid}" for pid in procs.stop_pids(supervisors, STOP_WAIT_S)]
    # A supervisor killed by a crash leaves its systemd-nspawn behind; find it by its PID file.
    pid_files = sorted((state_dir / "hosts").glob("*/nspawn.pid"))
    orphans = [(procs.read_pid(pid_file), NSPAWN_MARKER) for pid_file in pid_files]
    stopped += [f"orphaned systemd-nspawn {pid}" for pid in procs.stop_pids(orphans)]
    for pid_file in pid_files:
        pid_file.unlink(missing_ok=True)
    # A host whose supervisor and nspawn were killed keeps running: its own systemd lives on
    # (re-parented to this machine's init). Killing PID 1 of its PID namespace ends them all.
    inodes = host_inodes(state_dir, state)
    orphaned = container_leaders(state_dir, state)
    procs.kill_and_wait(orphaned)
    stopped += [f"orphaned container (leader pid {pid})" for pid in orphaned]
    if state is not None:
        markers = {"apt_proxy": "apt-cacher-ng", "http_server": "gpufleet.sandbox.upstream"}
        for service, pid in state.pids.items():
            if procs.stop_pid(pid, markers.get(service, str(state_dir)), timeout=10.0):
                stopped.append(service)
    # Whatever still runs with our state directory in its arguments was started by a sandbox
    # whose state.json is gone (a crash between start and save, or a deleted file).
    strays = ours.sandbox_processes(state_dir)
    stray_pids = procs.stop_pids([(pid, line) for pid, line in strays], timeout=10.0)
    stopped += [f"stray process {pid}" for pid in stray_pids]
    stopped += [f"mount {m}" for m in hosts.unmount_all(state_dir)]
    deadline = time.monotonic() + 10.0  # a killed init's namespace empties after it, not with it
    while (remaining := container_processes_in(inodes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if remaining:  # keep the record, so `status` and `leftovers` still see them
        log(f"sandbox down: processes still run inside the hosts: {remaining}")
        return stopped
    stopped += network.remove_network(network.owner_tag(state_dir))
    hosts.remove_host_dirs(state_dir)
    state_file(state_dir).unlink(missing_ok=True)
    if stopped:
        log(f"sandbox down: stopped/removed {len(stopped)} item(s)")
    return stopped


def leftovers(state_dir: Path = STATE_DIR) -> list[str]:
    """What of a sandbox is still on this machine (empty after a clean `down`)."""
    tag = network.owner_tag(state_dir)
    found = [f"netns {ns}" for ns in network.sandbox_namespaces(tag)]
    found += [f"link {link}" for link in network.sandbox_links(tag)]
    found += [f"mount {m}" for m in hosts.sandbox_mounts(state_dir)]
    found += [f"process {pid}: {line[:120]}" for pid, line in ours.sandbox_processes(state_dir)]
    try:
        state: SandboxState | None = load_state(state_dir)
    except SandboxError:
        state = None
    found += [
        f"process {pid} inside a host: {procs.cmdline(pid)[:100]}"
        for pid in container_processes(state_dir, state)
    ]
    return found
