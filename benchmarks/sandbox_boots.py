"""Boot sandbox fleets again and again and count hosts that come up `degraded` (issue 11).

    flock /work/sandbox.lock .venv/bin/python benchmarks/sandbox_boots.py --fleets 20 --hosts 3

Each round: `gpufleet sandbox up --hosts N --no-standins`, then on every host
`systemctl is-system-running --wait` and, when that is not `running`, the failed units and
their journal; then `gpufleet sandbox down`. Prints one line per round and a JSON summary at the
end; exits 1 when any host was not `running`. Needs root, like the sandbox itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpufleet.sandbox.state import STATE_DIR, load_state  # noqa: E402

SYSTEM_STATE = "systemctl is-system-running --wait"
FAILED = "systemctl --failed --no-legend --plain | awk '{print $1}'"


def gpufleet(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gpufleet.cli", "sandbox", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def ssh(address: str, command: str) -> str:
    proc = subprocess.run(
        ["ssh", "-i", str(STATE_DIR / "id_ed25519"),
         "-o", f"UserKnownHostsFile={STATE_DIR / 'known_hosts'}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
         f"root@{address}", command],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return proc.stdout.strip() or f"(ssh rc {proc.returncode}: {proc.stderr.strip()[-200:]})"


@dataclass
class Boot:
    """One host of one round: its system state and, when not running, why."""

    host: str
    state: str
    failed: list[str] = field(default_factory=list)
    journal: dict[str, str] = field(default_factory=dict)


def one_round(hosts: int, journal_lines: int) -> list[Boot]:
    up = gpufleet("up", "--hosts", str(hosts), "--no-standins")
    if up.returncode != 0:
        return [Boot("(up)", "up failed", journal={"up": up.stderr.strip()[-400:]})]
    try:
        boots = []
        for host in load_state().hosts:
            boot = Boot(host.name, ssh(host.address, SYSTEM_STATE))
            if boot.state != "running":
                boot.failed = ssh(host.address, FAILED).split()
                for unit in boot.failed:
                    journal = f"journalctl -b -u {unit} --no-pager -n {journal_lines}"
                    boot.journal[unit] = ssh(host.address, journal)
            boots.append(boot)
        return boots
    finally:
        gpufleet("down")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fleets", type=int, default=20, help="rounds of up/check/down")
    parser.add_argument("--hosts", type=int, default=3, help="hosts per fleet")
    parser.add_argument("--journal-lines", type=int, default=15)
    args = parser.parse_args(argv)
    states: Counter[str] = Counter()
    failed_units: Counter[str] = Counter()
    started = time.monotonic()
    for number in range(1, args.fleets + 1):
        round_started = time.monotonic()
        boots = one_round(args.hosts, args.journal_lines)
        states.update(boot.state for boot in boots)
        failed_units.update(unit for boot in boots for unit in boot.failed)
        line = ", ".join(f"{boot.host} {boot.state}" for boot in boots)
        print(f"fleet {number:2}: {line} ({time.monotonic() - round_started:.1f} s)", flush=True)
        for boot in boots:
            for unit, journal in boot.journal.items():
                print(f"  {boot.host} {unit}:\n    " + journal.replace("\n", "\n    "))
    hosts_total = sum(states.values())
    summary = {
        "fleets": args.fleets,
        "hosts_per_fleet": args.hosts,
        "hosts": hosts_total,
        "running": states["running"],
        "not_running": hosts_total - states["running"],
        "states": dict(states),
        "failed_units": dict(failed_units),
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary))
    return 0 if summary["not_running"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
