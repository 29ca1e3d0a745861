"""The fast node health check (< 10 s, no workload): Slurm's HealthCheckProgram on GPU hosts.

Example (what /usr/local/sbin/gpufleet-healthcheck runs as root, from the payload's folder)::

    python3 -m validation.host.healthcheck --config /etc/gpufleet/healthcheck.json --slurm

Checks, in order: the driver loaded at the pinned branch, the driver's packages installed on
that branch and locked (held, apt-pinned or NVIDIA's pinning package), the GPU count, ECC,
row remapping, clock event reasons, Xid events since boot, persistence mode and Fabric Manager.
On a GPU-less host (``gpu_less``, no NVIDIA GPU on the PCI bus) the GPU checks say "no NVIDIA
GPU" and the rest (packages, services) is still judged. With ``--slurm`` the node is drained
with ``gpufleet: <check>: <message>`` when a check fails, and resumed when all pass, only if
gpufleet drained it. Exit status: 0 healthy, 1 a check failed, 2 the check could not run.
Standard library and gpufleet's pure-Python parts only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet import health
from gpufleet.compat import zip_strict
from validation.host.hostinfo import GPU_CLASSES, NVIDIA_VENDOR, NVSWITCH_CLASS

TIMEOUT_S = 5  # per command: the whole check must stay under Slurm's 60 s kill
NO_GPU = "no NVIDIA GPU on the PCI bus (gpu_less host): not checked"
# Xid codes that mean the GPU must leave service (NVIDIA's Xid catalogue): 48 double-bit ECC,
# 63/64 row remap event/failure, 74 NVLink error, 79 fallen off the bus, 92 high single-bit
# ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP errors. Others are reported only.
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
# Clock event reasons that are faults even on an idle GPU (idle itself is normal here).
IDLE_FAULTS = frozenset(
    {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
)
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")

Run = Callable[[Sequence[str]], tuple[int, str]]


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run one command with the per-command limit; a missing tool is exit 127."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} did not answer within {TIMEOUT_S} s"
    return proc.returncode, proc.stdout + proc.stderr


@dataclass
class Host:
    """What the checks read: commands, the PCI bus in sysfs, /proc (a root for tests)."""

    run: Run = run_command
    root: Path = Path("/")

    def read(self, path: str) -> str | None:
        try:
            return (self.root / path.lstrip("/")).read_text()
        except OSError:
            return None

    def pci(self) -> tuple[int, int]:
        """(NVIDIA GPUs, NVSwitches) on the PCI bus."""
        gpus = switches = 0
        for device in sorted((self.root / "sys/bus/pci/devices").glob("*")):
            try:
                vendor = (device / "vendor").read_text().strip().lower()
                pci_class = (device / "class").read_text().strip().lower()
            except OSError:
                continue
            if vendor == NVIDIA_VENDOR:
                gpus += pci_class.startswith(GPU_CLASSES)
                switches += pci_class.startswith(NVSWITCH_CLASS)
        return gpus, switches


Result = tuple[str, str, str]  # (check, status: pass|fail|skipped, message)


def _branch(version: str) -> str:
    """``"1:580.95.05-0ubuntu1"`` -> ``"580"``."""
    return version.split(":", 1)[-1].split(".", 1)[0]


def check_driver_loaded(host: Host, config: dict[str, Any], gpus: int) -> Result:
    text = host.read("/proc/driver/nvidia/version")
    if text is None:
        if not gpus and config.get("gpu_less"):
            return ("driver_loaded", "skipped", NO_GPU)
        return ("driver_loaded", "fail", "no NVIDIA kernel module loaded (/proc/driver/nvidia)")
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+)\.\d+", text)
    branch = str(config.get("driver_branch") or "")
    if match and branch and match.group(1) != branch:
        return ("driver_loaded", "fail", f"driver branch {match.group(1)} loaded, pinned {branch}")
    return ("driver_loaded", "pass", f"driver branch {match.group(1) if match else '?'} loaded")


def _locked(host: Host, name: str, held: set[str]) -> bool:
    if name in held:
        return True
    pattern = f"^Package:.*(^|[ ]){re.escape(name)}([ ]|$)"
    status, _ = host.run(
        ["sh", "-c", 'grep -Eqs "$1" /etc/apt/preferences /etc/apt/preferences.d/*', "-", pattern]
    )
    return status == 0


def check_driver_packages(host: Host, config: dict[str, Any]) -> Result:
    names = list(config.get("driver_packages") or [])
    pinning = config.get("pinning_package")
    branch = str(config.get("driver_branch") or "")
    if not names:
        return ("driver_packages", "skipped", "no driver packages declared")
    wanted = names + ([pinning] if pinning else [])
    _, out = host.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Status}\\n", *wanted]
    )
    installed = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "installed":
            installed[parts[0].split(":", 1)[0]] = parts[1]
    missing = [n for n in wanted if n not in installed]
    if missing:
        return ("driver_packages", "fail", f"not installed: {', '.join(missing)}")
    off = [f"{n} {installed[n]}" for n in names if branch and _branch(installed[n]) != branch]
    if off:
        return ("driver_packages", "fail", f"{', '.join(off)}: not on the pinned branch {branch}")
    if not pinning:
        _, held_text = host.run(["apt-mark", "showhold"])
        held = {line.strip().split(":", 1)[0] for line in held_text.splitlines() if line.strip()}
        loose = [n for n in names if not _locked(host, n, held)]
        if loose:
            return ("driver_packages", "fail", f"neither held nor pinned: {', '.join(loose)}")
    lock = pinning or "apt-mark hold"
    return ("driver_packages", "pass", f"{', '.join(names)} on branch {branch}, locked by {lock}")


def smi_checks(host: Host, config: dict[str, Any], gpus: int) -> list[Result]:
    """GPU count, ECC, row remap and idle clock events from one ``nvidia-smi -q -x``."""
    names = ("gpu_count", "ecc", "row_remap", "clock_events")
    if not gpus and config.get("gpu_less"):
        return [(name, "skipped", NO_GPU) for name in names]
    expected = config.get("gpu_count") or gpus
    if not gpus:
        return [("gpu_count", "fail", f"no NVIDIA GPU on the PCI bus, {expected} expected")]
    status, out = host.run(["nvidia-smi", "-q", "-x"])
    if status != 0:
        return [("gpu_count", "fail", f"nvidia-smi -q -x exited {status}: {out.strip()[:200]}")]
    from gpufleet.parsers import parse_nvidia_smi_xml

    try:
        smi = parse_nvidia_smi_xml(out)
    except ValueError as exc:
        return [("gpu_count", "fail", f"nvidia-smi -q -x is unreadable: {exc}")]
    findings = health.evaluate_idle(smi, expected) + [
        f
        for f in health.check_clock_event_reasons(smi)
        if set(f.figures.get("active", ())) & IDLE_FAULTS
    ]
    results = []
    finding_checks = ("gpu_count", "ecc", "row_remap", "clock_event_reasons")
    for name, check in zip_strict(names, finding_checks):
        bad = health.failures(findings, check)
        results.append((name, "fail", bad[0].message) if bad else (name, "pass", ""))
    return results


def check_xid(host: Host, config: dict[str, Any], gpus: int) -> Result:
    if not gpus and config.get("gpu_less"):
        return ("xid", "skipped", NO_GPU)
    _, out = host.run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-g", "NVRM: Xid"])
    events = [(m.group(1), int(m.group(2))) for m in _XID.finditer(out)]
    critical = [(bus, xid) for bus, xid in events if xid in CRITICAL_XIDS]
    if critical:
        bus, xid = critical[-1]
        return ("xid", "fail", f"Xid {xid} on {bus} since boot ({len(events)} Xid event(s))")
    return ("xid", "pass", f"{len(events)} non-critical Xid event(s)" if events else "")


def check_persistence(host: Host, config: dict[str, Any], gpus: int) -> Result:
    if not config.get("persistenced", True):
        return ("persistence", "skipped", "persistenced = False in the inventory")
    _, state = host.run(["systemctl", "is-active", "nvidia-persistenced"])
    state = state.strip() or "missing"
    if state != "active":
        return ("persistence", "fail", f"nvidia-persistenced is {state}, expected active")
    if not gpus:
        return ("persistence", "pass", "nvidia-persistenced active (no NVIDIA GPU to query)")
    _, out = host.run(["nvidia-smi", "--query-gpu=index,persistence_mode", "--format=csv,noheader"])
    off = [line.split(",")[0] for line in out.splitlines() if "Enabled" not in line]
    if off:
        return ("persistence", "fail", f"persistence mode off on GPU(s) {', '.join(off)}")
    return ("persistence", "pass", "")


def check_fabric_manager(host: Host, config: dict[str, Any], switches: int) -> Result:
    wanted = config.get("fabric_manager", "auto")
    if wanted == "off" or (wanted == "auto" and not switches):
        return ("fabric_manager", "skipped", "no NVSwitch on the PCI bus: not needed")
    _, state = host.run(["systemctl", "is-active", "nvidia-fabricmanager"])
    state = state.strip() or "missing"
    if state != "active":
        return ("fabric_manager", "fail", f"nvidia-fabricmanager is {state}, expected active")
    return ("fabric_manager", "pass", "")


def run_checks(config: dict[str, Any], host: Host | None = None) -> list[Result]:
    """Every check of the fast tier, in order."""
    host = host or Host()
    gpus, switches = host.pci()
    return [
        check_driver_loaded(host, config, gpus),
        check_driver_packages(host, config),
        *smi_checks(host, config, gpus),
        check_xid(host, config, gpus),
        check_persistence(host, config, gpus),
        check_fabric_manager(host, config, switches),
    ]


def first_failure(results: Sequence[Result]) -> tuple[str, str] | None:
    for check, status, message in results:
        if status == "fail":
            return check, message
    return None


# Each Slurm round leaves what it decided here, so an operator (and a test) can see when the
# check last ran on a node and why it drained or resumed it.
LAST_ROUND = Path("/run/gpufleet/healthcheck-last.json")


def record_round(path: Path, node: str, failure: object, why: str) -> None:
    """Write the round's outcome atomically (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(
        json.dumps({"node": node, "finished_at": time.time(), "failure": failure, "why": why})
        + "\n"
    )
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.host.healthcheck")
    parser.add_argument("--config", type=Path, default=Path("/etc/gpufleet/healthcheck.json"))
    parser.add_argument("--slurm", action="store_true", help="drain/resume this node in Slurm")
    parser.add_argument("--node", help="the Slurm node name (default: the short host name)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--last-round", type=Path, default=LAST_ROUND, help="where a --slurm round is recorded"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        config = json.loads(args.config.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"gpufleet-healthcheck: cannot read {args.config}: {exc}", file=sys.stderr)
        return 2
    results = run_checks(config)
    failure = first_failure(results)
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"results": results, "failure": failure, "elapsed_s": elapsed}))
    else:
        for check, status, message in results:
            print(f"{status:8} {check:16} {message}")
    if args.slurm:
        from gpufleet.scheduler.rule import SchedulerError
        from gpufleet.scheduler.slurm import Slurm, local_runner

        node = args.node or socket.gethostname().split(".", 1)[0]
        try:
            passed = {check for check, status, _message in results if status == "pass"}
            action = Slurm(local_runner).apply(node, failure, passed)
        except SchedulerError as exc:
            print(f"gpufleet-healthcheck: {exc}", file=sys.stderr)
            return 2
        print(action.why)
        record_round(args.last_round, node, failure, action.why)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
