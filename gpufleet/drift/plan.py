"""Drift: what `pyinfra INVENTORY DEPLOY --dry --json` and the quick validation tier say, per host.

The plan is read from pyinfra's CLI in a subprocess (importing ``pyinfra_cli`` monkey-patches
this process with gevent), without ``-y``: with ``-y`` pyinfra skips change detection and every
plan looks clean. ``--debug`` is passed because the debug log is the only place pyinfra names
the hosts it failed ("Failing hosts: ..."); the plan JSON lists only hosts that would change.

Example::

    run = run_plan("inventories/prod.py", "deploy/gpu_node.py")
    report = build_report(["gpu-a", "gpu-b"], run)
    report.exit_status   # 0 clean, 1 drift, 2 could not check
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.drift.sentences import conditional_sentence, sentence_for
from gpufleet.stages.foreign import DRIFT_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEPLOY = REPO_ROOT / "deploy" / "gpu_node.py"

# pyinfra's stderr: "    [HOST]   message" (host names padded to one width) and "--> Header".
_HOST_LINE = re.compile(r"^\s{4}\[(?P<host>[^\]]+)\]\s+(?P<message>\S.*)$")
_FAILING = re.compile(r"\[pyinfra\.api\.state\] Failing hosts: (?P<hosts>.+)$")
_ACTIVATING = re.compile(r"\[pyinfra\.api\.state\] Activating host: (?P<host>.+)$")
_DEBUG = re.compile(r"^\s*\[(pyinfra|pyinfra_cli)\.[\w.]+\]")
# Host lines that carry no finding: progress, and the deploy's own plan summary / warnings.
_ROUTINE = re.compile(r"^(Connected|Ready: .*|gpufleet plan: .*|noop: .*)$")
_LOADING = ("--> Loading config...", "--> Loading inventory...")
_STAGES = {
    "--> Connecting to hosts...": "connect",
    "--> Preparing operation files...": "prepare",
    "--> Disconnecting from hosts...": "disconnect",
}


# How a host whose reboot policy is 'never' says its driver waits for one (operations.kernel).
REBOOT_PENDING = "reboot pending: "
# The operation a reported finding stands under (no operation repairs it).
REPORTED = "reported by the deploy (not repaired: the administrator's to change)"


class DriftError(RuntimeError):
    """pyinfra could not be run, or printed something that is not a plan; says what to do."""


@dataclass
class PlanRun:
    """What one ``pyinfra --dry --json --debug`` run left: exit status, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str
    command: list[str] = field(default_factory=list)


@dataclass
class HostEvents:
    """What pyinfra's stderr said about one host."""

    connected: bool = False
    failed_at: str | None = None  # "connect" or "prepare" when pyinfra failed the host
    messages: list[str] = field(default_factory=list)


@dataclass
class HostDrift:
    """One host's drift: pending changes as sentences, conditional ones, validation failures.

    ``changes`` and ``operations`` run in parallel: the sentence and the operation it came from.
    """

    name: str
    status: str = "clean"
    changes: list[str] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    conditional: list[str] = field(default_factory=list)
    validation_failures: list[dict[str, str]] = field(default_factory=list)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "changes": list(self.changes),
            "operations": list(self.operations),
            "conditional": list(self.conditional),
            "validation_failures": [dict(f) for f in self.validation_failures],
        }


@dataclass
class DriftReport:
    """Every host's drift, in inventory order, and when it was checked."""

    hosts: dict[str, HostDrift]
    checked_at: str
    notes: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """2 when some host could not be checked (it failed while planning), else 3 when some
        host could not be reached, else 1 when some host drifted, else 0
        (docs/reference/exit-codes.md)."""
        statuses = {host.status for host in self.hosts.values()}
        if "error" in statuses:
            return 2
        if "unreachable" in statuses:
            return 3
        return 1 if "drift" in statuses else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked_at": self.checked_at,
            "hosts": {name: host.to_dict() for name, host in self.hosts.items()},
            "notes": list(self.notes),
            "exit_status": self.exit_status,
        }


def pyinfra_command() -> list[str]:
    """The pyinfra beside the running interpreter (same virtualenv), else the one on PATH."""
    beside = Path(sys.executable).with_name("pyinfra")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("pyinfra")
    return [found] if found else [sys.executable, "-m", "pyinfra_cli"]


def plan_command(inventory: str, deploy: str, limits: Sequence[str] = ()) -> list[str]:
    """``pyinfra INVENTORY DEPLOY --dry --json --debug`` (never ``-y``: see the module doc)."""
    command = [*pyinfra_command(), inventory, deploy, "--dry", "--json", "--debug"]
    for limit in limits:
        command += ["--limit", limit]
    return command


def run_plan(
    inventory: str, deploy: str, *, limits: Sequence[str] = (), timeout: float = 900.0
) -> PlanRun:
    """Run the dry plan in a subprocess and return what it printed.

    Example: ``run_plan("@local", "tests/fixtures/drift/deploy_probe.py").returncode``
    """
    command = plan_command(inventory, deploy, limits)
    # Stamps are used (a stamped host is clean) but never written: a dry run's reads are no
    # ground for skipping the real deploys that follow (review finding 17).
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "GPUFLEET_STAMPS": "read"}
    # The deploy imports gpufleet: make this checkout importable even when not installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=env,
            check=False,
        )
    except FileNotFoundError as exc:
        raise DriftError(f"cannot run pyinfra ({exc}); install gpufleet's dependencies") from exc
    except subprocess.TimeoutExpired as exc:
        raise DriftError(
            f"`pyinfra {inventory} {deploy} --dry` took over {timeout:.0f} s; "
            "raise --timeout or check the hosts with --limit"
        ) from exc
    return PlanRun(proc.returncode, proc.stdout, proc.stderr, command)


def parse_plan(stdout: str) -> list[dict[str, Any]] | None:
    """The ``plan`` list of ``--dry --json`` output; None when pyinfra printed no JSON at all.

    Example: ``parse_plan('{"plan": [], "results": null}') == []``
    """
    if not stdout.strip():
        return None
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise DriftError(
            f"pyinfra printed something other than its --json plan ({exc}): "
            f"{stdout.strip()[:200]!r}; is the pyinfra in use 3.10 or newer?"
        ) from exc
    plan = document.get("plan") if isinstance(document, dict) else None
    if not isinstance(plan, list) or not all(isinstance(op, dict) for op in plan):
        raise DriftError("pyinfra's --json output has no 'plan' list; is it pyinfra 3.10 or newer?")
    for op in plan:
        for key in ("name", "hosts_with_change", "hosts_with_conditional_change"):
            if key not in op:
                raise DriftError(f"a plan operation lacks {key!r}: {op!r}")
    return plan


def parse_stderr(stderr: str, host_names: Iterable[str]) -> dict[str, HostEvents]:
    """Per host: did it connect, did pyinfra fail it (and when), and what it logged about it.

    Only names in ``host_names`` count as hosts, so debug lines such as
    ``[pyinfra.api.facts] ...`` are never mistaken for one.
    """
    events = {name: HostEvents() for name in host_names}
    stage = "start"
    for line in stderr.splitlines():
        stripped = line.strip()
        if stripped in _STAGES:
            stage = _STAGES[stripped]
            continue
        if found := _ACTIVATING.search(line):
            if found["host"].strip() in events:
                events[found["host"].strip()].connected = True
            continue
        if found := _FAILING.search(line):
            for name in found["hosts"].split(", "):
                if name.strip() in events and events[name.strip()].failed_at is None:
                    events[name.strip()].failed_at = stage
            continue
        found = _HOST_LINE.match(line)
        if not found or found["host"] not in events:
            continue
        message = found["message"].strip()
        if message == "Connected":
            events[found["host"]].connected = True
        elif not _ROUTINE.match(message):
            events[found["host"]].messages.append(message)
    return events


def fatal_message(stderr: str, lines: int = 12) -> str:
    """What pyinfra said when it stopped without a plan: from its error header on, shortened."""
    kept = [
        line.rstrip()
        for line in stderr.splitlines()
        if line.strip() and not _DEBUG.match(line) and line.strip() not in _STAGES
    ]
    start = next(
        (i for i, line in enumerate(kept) if line.startswith("--> ") and line not in _LOADING),
        0,
    )
    tail = kept[start:]
    if len(tail) > lines:  # keep the header and the end (a traceback's last lines say most)
        tail = [tail[0], "...", *tail[-(lines - 2) :]]
    return "\n".join(tail) or "pyinfra stopped without a plan and printed nothing"


def _reason(events: HostEvents, fallback: str) -> str:
    return "; ".join(events.messages) or fallback


def _unreachable(events: HostEvents) -> bool:
    # Without --debug there is no "Failing hosts" line: a host that logged something but
    # never connected is one pyinfra could not reach.
    return events.failed_at == "connect" or (bool(events.messages) and not events.connected)


def build_report(
    host_names: Sequence[str],
    run: PlanRun,
    *,
    checked_at: str | None = None,
) -> DriftReport:
    """Turn one plan run into a report: a status, a reason and sentences for every host."""
    checked_at = checked_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    plan = parse_plan(run.stdout)
    names = list(dict.fromkeys(host_names))
    if plan is not None:  # hosts the inventory listing missed still get reported
        for op in plan:
            for name in [*op["hosts_with_change"], *op["hosts_with_conditional_change"]]:
                if name not in names:
                    names.append(name)
    events = parse_stderr(run.stderr, names)
    hosts = {name: HostDrift(name=name) for name in names}
    if plan is None:
        fatal = fatal_message(run.stderr)
        last = fatal.splitlines()[-1].removeprefix("--> ")
        for name, host in hosts.items():
            found = events[name]
            if _unreachable(found):
                host.status = "unreachable"
                host.reason = _reason(found, "could not connect")
            else:  # the host's own lines (a preflight refusal) say why, not "No hosts remaining!"
                host.status = "error"
                stopped = f"pyinfra stopped before planning (exit {run.returncode}): {last}"
                host.reason = "; ".join(found.messages) or stopped
        return DriftReport(hosts=hosts, checked_at=checked_at, notes=[f"pyinfra said:\n{fatal}"])
    for op in plan:
        name = str(op["name"])
        for host_name in op["hosts_with_change"]:
            hosts[host_name].changes.append(sentence_for(name))
            hosts[host_name].operations.append(name)
        for host_name in op["hosts_with_conditional_change"]:
            hosts[host_name].conditional.append(conditional_sentence(name))
    for name, host in hosts.items():
        found = events[name]
        for message in found.messages:  # what the deploy leaves to the administrator
            if message.startswith(DRIFT_PREFIX):
                host.changes.append(message.removeprefix(DRIFT_PREFIX))
                host.operations.append(REPORTED)
            elif message.startswith(REBOOT_PENDING):  # reboot: never (a stamped run says it too)
                host.changes.append(message)
                host.operations.append(REPORTED)
        if _unreachable(found):
            host.status = "unreachable"
            host.reason = _reason(found, "could not connect")
        elif found.failed_at is not None:
            host.status = "error"
            host.reason = "failed while planning: " + _reason(found, "see pyinfra's log")
        elif not found.connected:
            host.status = "error"
            host.reason = "pyinfra never connected to this host (is it in the inventory?)"
        elif host.changes:
            host.status = "drift"
    report = DriftReport(hosts=hosts, checked_at=checked_at)
    if run.returncode != 0 and report.exit_status < 2:
        # pyinfra failed but named no host that failed: never call that clean (changes stay).
        for host in hosts.values():
            host.status = "error"
            host.reason = f"pyinfra exited {run.returncode} without naming a failed host"
        report.notes.append(f"pyinfra said:\n{fatal_message(run.stderr)}")
    return report


def failed_checks(document: Mapping[str, Any]) -> list[dict[str, str]]:
    """The failed or errored checks of a results document, as ``{"check", "status", "message"}``."""
    return [
        {
            "check": str(check.get("name", "?")),
            "status": str(check.get("status")),
            "message": str(check.get("message") or ""),
        }
        for check in document.get("checks", [])
        if check.get("status") in ("fail", "error")
    ]


def merge_validation(
    report: DriftReport, documents: Mapping[str, Mapping[str, Any] | None], *, why_missing: str
) -> None:
    """Fold each host's quick-tier results into the report (in place).

    A host whose validation could not run, or left no document, cannot be called clean: it is
    an ``error`` unless pyinfra already found it unreachable.
    """
    for name, host in report.hosts.items():
        if host.status in ("unreachable", "error"):
            continue
        document = documents.get(name)
        if document is None:
            host.status, host.reason = "error", f"validation left no results: {why_missing}"
            continue
        if document.get("run_error"):
            host.status = "error"
            host.reason = f"validation could not run: {document['run_error']}"
            continue
        host.validation_failures = failed_checks(document)
        if host.validation_failures:
            host.status = "drift"
