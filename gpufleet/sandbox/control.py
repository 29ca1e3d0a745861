"""The sandbox actions behind `gpufleet sandbox` (up, status, down, stop, start), printed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpufleet.sandbox import fleet, hostctl, pci_record, procs
from gpufleet.sandbox.state import (
    STATE_DIR,
    SandboxError,
    SandboxState,
    check_host_count,
    host_name,
    load_state,
)

EPILOG = """\
Hosts are systemd-nspawn containers booted with systemd, one network namespace each
(gfsb-hN at 10.231.7.(10+N)), reachable only from this machine. They fetch OS packages through
apt-cacher-ng on 10.231.7.1:3142 and stand-in NVIDIA packages and wheels from 10.231.7.1:8631.
Provision them with:  pyinfra -y inventories/sandbox.py deploy/gpu_node.py
"""


# One line per `up`: when, how many hosts, how many of them bare (each one a first deploy to
# come) and how long it took; benchmarks/ci_time.py counts a CI run's ups from it.
UPS_LOG = STATE_DIR / "log" / "ups.jsonl"


def record_up(state: SandboxState, seconds: float, log: Path = UPS_LOG) -> None:
    bare = [h.name for h in state.hosts if not h.layers]
    line = {
        "at": round(time.time(), 3),
        "image": state.image,
        "hosts": len(state.hosts),
        "bare": bare,
        "snapshot": state.snapshot,
        "slurm": bool(state.slurm_controller),
        "seconds": round(seconds, 1),
    }
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    pci = pci_record.parse_assignments(getattr(args, "pci_record", None) or ())
    # Before anything starts or an earlier sandbox is stopped: a wrong host or name costs nothing.
    names = [host_name(i) for i in range(1, check_host_count(args.hosts) + 1)]
    pci_record.check_assignments(pci, names)
    state = fleet.up(
        args.hosts,
        args.image,
        standins=not args.no_standins,
        slurm=getattr(args, "slurm", False),
        from_snapshot=getattr(args, "from_snapshot", None),
        bare=getattr(args, "bare", None) or (),
        pci_records=pci,
    )
    elapsed = time.monotonic() - started
    record_up(state, elapsed)
    if getattr(args, "json", False):
        hosts = [{"name": h.name, "address": h.address} for h in state.hosts]
        print(json.dumps({"image": state.image, "seconds": round(elapsed, 1), "hosts": hosts}))
        return 0
    print(f"sandbox up in {elapsed:.1f} s: {state.image}, {len(state.hosts)} host(s)")
    for host in state.hosts:
        print(f"  {host.name}  root@{host.address}")
    if getattr(args, "quiet", False):  # -q: the hints go, the hosts stay
        return 0
    print(f"state: {STATE_DIR / 'state.json'}")
    print(f"ssh:   ssh -i {STATE_DIR / 'id_ed25519'} root@{state.hosts[0].address}")
    print("provision: pyinfra -y inventories/sandbox.py deploy/gpu_node.py")
    print("tear down: gpufleet sandbox down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        state = load_state()
    except SandboxError as exc:
        print(exc, file=sys.stderr)
        leftovers = fleet.leftovers()
        if leftovers:
            print("left over from an earlier sandbox (`gpufleet sandbox down` removes them):")
            for item in leftovers:
                print(f"  {item}")
        return 1
    hosts = [hostctl.probe(host) for host in state.hosts]
    services = {service: bool(procs.cmdline(pid)) for service, pid in state.pids.items()}
    healthy = all(s.word == "running" for s in hosts) and all(services.values())
    if getattr(args, "json", False):
        shown = {
            "image": state.image,
            "gateway": state.gateway,
            "hosts": [{"state": s.word, "text": s.describe()} for s in hosts],
            "services": {name: "running" if up else "stopped" for name, up in services.items()},
            "healthy": healthy,
        }
        print(json.dumps(shown, indent=2))
        return 0 if healthy else 1
    print(f"image {state.image} ({' '.join(state.os)}), gateway {state.gateway}")
    for status in hosts:
        print(f"  {status.describe()}")
    for service, pid in sorted(state.pids.items()):
        print(f"  {service:24} pid {pid} {'running' if services[service] else 'STOPPED'}")
    if state.pip_index_url:
        print(f"  nvidia repo {state.nvidia_repo_url}, pip index {state.pip_index_url}")
    for note in state.notes:
        print(f"  note: {note}")
    return 0 if healthy else 1


def cmd_stop(args: argparse.Namespace) -> int:
    started = time.monotonic()
    status = hostctl.stop(args.host, hard=args.hard)
    how = "power cut" if args.hard else "clean shutdown"
    print(f"{args.host} stopped ({how}) in {time.monotonic() - started:.1f} s: {status.describe()}")
    print(f"power it on again: gpufleet sandbox start {args.host}")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    started = time.monotonic()
    status = hostctl.start(args.host)
    print(f"{args.host} started in {time.monotonic() - started:.1f} s: {status.describe()}")
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from gpufleet.sandbox.snapshot_take import take

    meta = take(args.name, args.host or ())
    print(f"snapshot {meta.name}: {', '.join(meta.hosts)} ({meta.image}); the hosts run on it")
    print(f"bring provisioned hosts up from it: gpufleet sandbox up --from-snapshot {meta.name}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    from gpufleet.sandbox.snapshot import forget

    print(f"snapshot {args.name} {'deleted' if forget(args.name) else 'was not there'}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    started = time.monotonic()
    fleet.down()
    left = fleet.leftovers()
    if left:
        print("sandbox down, but these remain:", *left, sep="\n  ", file=sys.stderr)
        return 1
    print(f"sandbox down in {time.monotonic() - started:.1f} s; nothing left behind")
    return 0


def run(args: argparse.Namespace) -> int:
    """Do what `gpufleet sandbox` was asked; the exit status."""
    try:
        if args.action in ("down", "stop", "start", "snapshot", "forget"):
            fleet.check_root()
        handlers = {
            "up": cmd_up,
            "status": cmd_status,
            "down": cmd_down,
            "stop": cmd_stop,
            "start": cmd_start,
            "snapshot": cmd_snapshot,
            "forget": cmd_forget,
        }
        handler = handlers[args.action]
        return handler(args)
    except SandboxError as exc:
        print(f"gpufleet sandbox {args.action}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; run `gpufleet sandbox down` to clean up", file=sys.stderr)
        return 130
