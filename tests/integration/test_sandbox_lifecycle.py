"""The sandbox fleet's own life: up, SSH, systemd, reboot from inside, crash recovery, down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.sandbox import fleet, leader, procs
from gpufleet.sandbox.state import STATE_DIR, load_state
from tests.integration.conftest import BOOT_ID, Sandbox, gpufleet, running_sandbox

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(2, standins=False) as running:
        yield running


def _boot_id(sandbox: Sandbox, host: int) -> str:
    """The host's boot ID: it changes when, and only when, it boots."""
    proc = sandbox.ssh(host, BOOT_ID)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_up_brings_the_two_hosts_it_was_asked_for(sandbox: Sandbox) -> None:
    """How long `up` takes is printed (benchmarks/sandbox_deploy.py measures it), not asserted:
    a loaded 2-core machine says nothing about the code."""
    cached = sandbox.image_existed
    print(f"\nsandbox up, 2 hosts: {sandbox.up_s:.1f} s (image cached before: {cached})")
    assert [h.name for h in sandbox.state.hosts] == ["gfsb-h1", "gfsb-h2"]


def test_each_host_answers_ssh_with_its_own_name_and_known_key(sandbox: Sandbox) -> None:
    for index, host in enumerate(sandbox.state.hosts):
        proc = sandbox.ssh(index, "hostname; cat /etc/machine-id")
        assert proc.returncode == 0, proc.stderr
        name, machine_id = proc.stdout.split()
        assert name == host.name
        assert len(machine_id) == 32


def test_systemd_is_init_and_the_system_is_running(sandbox: Sandbox) -> None:
    for index in range(2):
        proc = sandbox.ssh(index, "ps -p 1 -o comm=; systemctl is-system-running --wait")
        assert proc.stdout.split() == ["systemd", "running"], proc.stdout + proc.stderr


def _leader(name: str) -> int | None:
    return leader.recorded(STATE_DIR / "hosts" / name / leader.LEADER_FILE)


def test_each_hosts_systemd_has_a_cgroup_of_its_own(sandbox: Sandbox) -> None:
    """The cause of the `degraded` boots (issue 11 item 14): every host's systemd managed the
    same /payload cgroup tree, and raced the others' for units of the same name."""
    for host in sandbox.state.hosts:
        pid = _leader(host.name)
        assert pid is not None, f"no leader recorded for {host.name}"
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        assert f"/gpufleet-sandbox/{host.name}/" in cgroup, cgroup


def test_hosts_reach_the_gateway_and_nothing_else(sandbox: Sandbox) -> None:
    proc = sandbox.ssh(0, "ip route; ip route get 1.1.1.1 2>&1; ip route get 10.231.7.12")
    routes = proc.stdout
    assert not [line for line in routes.splitlines() if line.startswith("default")], routes
    assert "Network is unreachable" in routes
    assert "dev eth0" in routes


def test_os_packages_come_through_the_gateway_apt_proxy(sandbox: Sandbox) -> None:
    proc = sandbox.ssh(
        0, "apt-get update -q 2>&1; apt-config dump Acquire::http::Proxy", timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'Acquire::http::Proxy "http://10.231.7.1:3142";' in proc.stdout
    assert "Err:" not in proc.stdout


def test_status_reports_every_host_running(sandbox: Sandbox) -> None:
    proc = gpufleet("sandbox", "status")
    assert proc.stdout.count(" running ") >= 2
    assert "apt_proxy" in proc.stdout


def test_reboot_from_inside_comes_back(sandbox: Sandbox) -> None:
    before = _boot_id(sandbox, 0)
    sandbox.ssh(0, "touch /root/survives-reboot")
    started = time.monotonic()
    sandbox.ssh(0, "systemctl reboot")
    deadline = started + 60
    after = before
    while time.monotonic() < deadline:
        proc = sandbox.ssh(0, f"systemctl is-system-running --wait >/dev/null; {BOOT_ID}")
        if proc.returncode == 0 and proc.stdout.strip() != before:
            after = proc.stdout.strip()
            break
        time.sleep(0.2)
    round_trip = time.monotonic() - started
    print(f"\nreboot round trip: {round_trip:.1f} s")
    assert after != before, "the host did not come back with a new boot ID within 60 s"
    # Its boot clock restarted, as a server's does (pyinfra's server.reboot waits for that).
    uptime = float(sandbox.ssh(0, "cut -d' ' -f1 /proc/uptime").stdout)
    assert uptime < time.monotonic() - started + 5
    assert sandbox.ssh(0, "test -e /root/survives-reboot").returncode == 0
    # The other host was not touched.
    assert sandbox.ssh(1, "systemctl is-system-running").stdout.strip() == "running"


def _host_line(name: str) -> str:
    out = gpufleet("sandbox", "status", check=False).stdout
    return next(line for line in out.splitlines() if line.strip().startswith(name))


def test_killed_supervisor_leaves_an_orphan_that_status_sees_and_stop_hard_cuts(
    sandbox: Sandbox,
) -> None:
    """Fault 3' of the campaign: supervisor and nspawn killed, the host's systemd lives on and
    answers SSH. `status` must not say STOPPED; `stop --hard` really powers it off; `start`
    boots it again from its kept disk."""
    name = sandbox.state.hosts[1].name
    before = _boot_id(sandbox, 1)
    sandbox.ssh(1, "echo kept > /root/disk-survives-power-cut; sync")
    systemd = _leader(name)
    nspawn = procs.read_pid(STATE_DIR / "hosts" / name / "nspawn.pid")
    supervisor_pid = load_state().hosts[1].supervisor_pid
    assert systemd and nspawn and supervisor_pid
    for pid in (supervisor_pid, nspawn):
        os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert procs.cmdline(systemd), "the container's systemd died with nspawn"
    assert sandbox.ssh(1, "true").returncode == 0
    line = _host_line(name)
    assert "ORPHANED" in line and "STOPPED" not in line, line
    assert gpufleet("sandbox", "status", check=False).returncode == 1

    proc = gpufleet("sandbox", "stop", name, "--hard")
    assert "STOPPED" in proc.stdout, proc.stdout
    assert not procs.cmdline(systemd)
    assert sandbox.ssh(1, "true").returncode != 0
    assert "STOPPED" in _host_line(name)

    gpufleet("sandbox", "start", name)
    assert _boot_id(sandbox, 1) != before
    assert sandbox.ssh(1, "cat /root/disk-survives-power-cut").stdout.strip() == "kept"
    assert gpufleet("sandbox", "status").returncode == 0


def test_clean_stop_and_start_of_one_host(sandbox: Sandbox) -> None:
    name = sandbox.state.hosts[1].name
    proc = gpufleet("sandbox", "stop", name)
    assert "clean shutdown" in proc.stdout and "STOPPED" in proc.stdout
    assert sandbox.ssh(1, "true").returncode != 0
    assert sandbox.ssh(0, "true").returncode == 0  # the other host is untouched
    refused = gpufleet("sandbox", "start", "gfsb-h9", check=False)
    assert refused.returncode == 1 and "no host 'gfsb-h9'" in refused.stderr
    gpufleet("sandbox", "start", name)
    assert sandbox.ssh(1, "systemctl is-system-running --wait").stdout.strip() == "running"
    again = gpufleet("sandbox", "start", name, check=False)
    assert again.returncode == 1 and "is not stopped" in again.stderr


def test_up_after_a_crash_cleans_up_first(sandbox: Sandbox) -> None:
    state = load_state()
    orphans = []
    for host in state.hosts:
        # A crash: the supervisor dies without shutting its host down; nspawn lives on.
        nspawn_pid = procs.read_pid(STATE_DIR / "hosts" / host.name / "nspawn.pid")
        orphans.append(nspawn_pid)
        assert host.supervisor_pid is not None
        os.kill(host.supervisor_pid, signal.SIGKILL)
    # ... and its state file is lost too, so only the machine itself tells what is left.
    (STATE_DIR / "state.json").unlink()
    apt_proxy = state.pids["apt_proxy"]
    time.sleep(0.5)
    assert all(pid is not None and procs.is_ours(pid, "systemd-nspawn") for pid in orphans)
    assert fleet.leftovers()
    proc = gpufleet("sandbox", "up", "--hosts", "2", "--no-standins")
    assert "cleaned up leftovers" in proc.stdout
    for pid in [*orphans, apt_proxy]:
        assert pid is not None and not procs.cmdline(pid), f"pid {pid} survived the clean-up"
    assert sandbox.ssh(1, "systemctl is-system-running --wait").stdout.strip() == "running"


def test_down_leaves_no_namespace_process_or_mount(sandbox: Sandbox) -> None:
    # One host orphaned first (supervisor and nspawn killed): `down` must stop its systemd too,
    # and say "nothing left behind" only when that is true.
    name = load_state().hosts[0].name
    systemd = _leader(name)
    nspawn = procs.read_pid(STATE_DIR / "hosts" / name / "nspawn.pid")
    supervisor_pid = load_state().hosts[0].supervisor_pid
    assert systemd and nspawn and supervisor_pid
    for pid in (supervisor_pid, nspawn):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert procs.cmdline(systemd)
    started = time.monotonic()
    proc = gpufleet("sandbox", "down")
    print(f"\nsandbox down, 2 hosts: {time.monotonic() - started:.1f} s")
    assert "nothing left behind" in proc.stdout
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "gfsb-" not in netns
    assert fleet.leftovers() == []
    assert not procs.cmdline(systemd), "the orphaned host's systemd survived `down`"
    assert gpufleet("sandbox", "status", check=False).returncode == 1


def _sh(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True)


def test_finding_21_down_and_up_touch_only_what_this_sandbox_made(tmp_path) -> None:
    """Another sandbox's namespace (same host name), an address in 10.231.7.0/24 and an
    operator's `grep` of the logs: `down` from an empty state directory leaves all three, and
    `up` refuses to start, naming what is in the way (before the fix, `down` deleted the
    namespace and killed the grep, and `up` added a second 10.231.7.1/24)."""
    state = tmp_path / "state"
    env = {**os.environ, "GPUFLEET_SANDBOX_STATE": str(state)}
    cli = [sys.executable, "-m", "gpufleet.cli", "sandbox"]
    decoy_name = f"grep systemd-nspawn {state}/log/gfsb-h1.log"
    assert _sh("ip", "netns", "add", "gfsb-h1").returncode == 0
    decoy = subprocess.Popen(["bash", "-c", f"exec -a '{decoy_name}' sleep 120"])
    try:
        assert _sh("ip", "link", "add", "sbclash0", "type", "bridge").returncode == 0
        assert _sh("ip", "addr", "add", "10.231.7.250/24", "dev", "sbclash0").returncode == 0
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "gfsb-h1" in _sh("ip", "netns", "list").stdout
        assert decoy.poll() is None, "down killed an operator's grep"
        up = subprocess.run(
            [*cli, "up", "--hosts", "1", "--no-standins"], env=env, capture_output=True, text=True
        )
        assert up.returncode == 1, up.stdout + up.stderr
        assert "10.231.7.0/24" in up.stderr and "address 10.231.7.250/24 on sbclash0" in up.stderr
        assert "network namespace gfsb-h1" in up.stderr and "ip netns del gfsb-h1" in up.stderr
        assert "Traceback" not in up.stderr
        assert "gfsb0" not in _sh("ip", "-o", "link", "show").stdout  # nothing was started
        assert "gfsb-h1" in _sh("ip", "netns", "list").stdout
    finally:
        decoy.kill()
        decoy.wait()
        _sh("ip", "link", "del", "sbclash0")
        _sh("ip", "netns", "del", "gfsb-h1")
