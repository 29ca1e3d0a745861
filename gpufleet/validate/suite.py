"""One host's pytest run of the suite: its command line, the run, and the document it left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from gpufleet.report.schema import ResultsSchemaError, validate_results
from gpufleet.validate.checks import no_match_message
from gpufleet.validate.hostrun import HostRun, error_document
from gpufleet.validate.progress import took
from gpufleet.validate.ssh import hostspec_for

SUITE_DIR = Path(__file__).resolve().parent.parent.parent / "validation"
# Whole-host limits for one pytest run (the workloads have their own, shorter, limits).
HOST_TIMEOUT_S = {"quick": 30 * 60, "full": 3 * 60 * 60}
# `--parallel`'s default: every host at once, up to this many SSH sessions (and pytest
# processes) on the control node; more hosts wait for a free slot.
MAX_PARALLEL = 64


def suite_arguments(
    run: HostRun,
    hostspec: str,
    paths: tuple[str, str, str],
    *,
    tier: str,
    run_id: str,
    select: str | None = None,
    checks: tuple[str, ...] = (),
    extra: Sequence[str] = (),
) -> list[str]:
    """pytest's arguments after the suite's folder, the same over SSH and in a Slurm job;
    ``paths``: the expectations, results JSON and JUnit XML files where pytest runs;
    ``extra``: options that go before the selection (the SSH path's --ssh-config)."""
    expectations, results, junit = paths
    command = [
        f"--hosts={hostspec}",
        f"--expectations={expectations}",
        f"--results-json={results}",
        f"--junit-xml={junit}",
        f"--tier={tier}",
        f"--run-id={run_id}",
        "-o",
        f"junit_suite_name={run.host.name}",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
        *extra,
    ]
    if select:
        command += ["-k", select]
    if checks:
        command.append(f"--checks={','.join(checks)}")
    return command


def pytest_command(
    run: HostRun,
    *,
    tier: str,
    run_id: str,
    ssh_config: Path | None,
    select: str | None = None,
    checks: tuple[str, ...] = (),
) -> list[str]:
    """The pytest command line for one host (run in a subprocess: its own process, its own
    plugins, and no gevent from pyinfra_cli anywhere near it)."""
    paths = (str(run.expectations_path), str(run.results_path), str(run.junit_path))
    extra = [f"--progress-file={progress_path(run)}"]
    if ssh_config is not None and not run.host.is_local:
        extra.append(f"--ssh-config={ssh_config}")
    arguments = suite_arguments(
        run,
        hostspec_for(run.host, run.alias),
        paths,
        tier=tier,
        run_id=run_id,
        select=select,
        checks=checks,
        extra=extra,
    )
    return [sys.executable, "-m", "pytest", str(SUITE_DIR), *arguments]


def progress_path(run: HostRun) -> Path:
    """The file the suite rewrites with each check's name as it starts (SSH runs only)."""
    return run.log_path.with_suffix(".check")


def current_check(run: HostRun, now: float) -> str:
    """``gpu_health::ecc 2m05s``: the check ``run`` is on and for how long, or "" if unknown."""
    path = progress_path(run)
    try:
        name, since = path.read_text().strip(), path.stat().st_mtime
    except OSError:
        return ""
    return f"{name} {took(max(0.0, now - since))}" if name else ""


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def run_host(
    run: HostRun,
    *,
    tier: str,
    run_id: str,
    ssh_config: Path | None,
    select: str | None = None,
    checks: tuple[str, ...] = (),
    asked: str | None = None,
) -> None:
    """Run pytest for one host and load (or, if it could not run, make up) its document.

    ``asked`` is the user's --select, named when nothing matched it; a run with a selection
    (the user's, or the scheduler's on a busy host) is marked partial: never a baseline.
    """
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    command = pytest_command(
        run, tier=tier, run_id=run_id, ssh_config=ssh_config, select=select, checks=checks
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with run.log_path.open("w") as log:
        try:
            proc = subprocess.run(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=run.log_path.parent,
                env=env,
                timeout=HOST_TIMEOUT_S[tier],
                check=False,
            )
            run.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            run.document = error_document(
                run,
                tier=tier,
                run_id=run_id,
                started_at=started_at,
                why=f"validation did not finish within {HOST_TIMEOUT_S[tier]} s",
            )
            return
    load_document(
        run,
        tier=tier,
        run_id=run_id,
        started_at=started_at,
        select=select,
        checks=checks,
        asked=asked,
    )


def load_document(
    run: HostRun,
    *,
    tier: str,
    run_id: str,
    started_at: str,
    select: str | None = None,
    checks: tuple[str, ...] = (),
    asked: str | None = None,
) -> None:
    """Read the results pytest wrote for ``run`` (checked against the schema) into
    ``run.document``, or make up the document that says why there are none."""
    try:
        document = json.loads(run.results_path.read_text())
        validate_results(document)
    except (OSError, json.JSONDecodeError, ResultsSchemaError) as exc:
        run.document = error_document(
            run,
            tier=tier,
            run_id=run_id,
            started_at=started_at,
            why=f"the suite wrote no usable results (pytest exit {run.returncode}: {exc}); "
            f"log:\n{_log_tail(run.log_path)}",
        )
        return
    if run.returncode == 5 and not document["run_error"] and not document["checks"]:
        why = no_match_message(asked or select or ",".join(checks), tier)
        document = {**document, "run_error": why, "status": "error"}
    elif run.returncode not in (0, 1) and not document["run_error"]:
        document = {**document, "run_error": f"pytest exit status {run.returncode}"}
        document["status"] = "error"
    if select or checks:
        document = {**document, "selection": ",".join(checks) or select}
    run.document = document
