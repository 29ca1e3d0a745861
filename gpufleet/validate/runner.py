"""The `gpufleet validate` runner: expectations per host, pytest per host over SSH, in parallel."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.report.schema import ResultsSchemaError, validate_results
from gpufleet.validate.hostrun import HostRun, describe_target, error_document
from gpufleet.validate.results import (
    baseline_notes,
    exit_status,
    merge_junit,
    safe_name,
    write_results,
)
from gpufleet.validate.ssh import close_masters, hostspec_for, ssh_config_text

SUITE_DIR = Path(__file__).resolve().parent.parent.parent / "validation"
# Whole-host limits for one pytest run (the workloads have their own, shorter, limits).
HOST_TIMEOUT_S = {"quick": 30 * 60, "full": 3 * 60 * 60}


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def expectations_for(
    host: InventoryHost, *, tier: str, run_id: str, python: str | None, payload_dir: str | None
) -> dict[str, Any]:
    """The expectations document for one host; raises SpecError for bad inventory data."""
    from gpufleet.spec import NodeSpec
    from gpufleet.stages.validation_payload import payload_paths
    from validation.expectations import Expectations, spec_data

    data = spec_data(host.data)
    spec = NodeSpec.from_host_data(data)  # refuse bad data here, with the key named, before SSH
    if host.is_local:
        python = python or sys.executable
        payload_dir = payload_dir or str(SUITE_DIR.parent)
    else:
        # What the validation_payload stage installs: current/{validation,gpufleet}.
        payload_dir = payload_dir or payload_paths(spec.payload_dir)[1]
    return Expectations(
        host=host.name,
        tier=tier,
        run_id=run_id,
        host_data=data,
        python=python,
        payload_dir=payload_dir,
        target=describe_target(host),
    ).to_dict()


def pytest_command(
    run: HostRun, *, tier: str, run_id: str, ssh_config: Path | None, select: str | None = None
) -> list[str]:
    """The pytest command line for one host (run in a subprocess: its own process, its own
    plugins, and no gevent from pyinfra_cli anywhere near it)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE_DIR),
        f"--hosts={hostspec_for(run.host, run.alias)}",
        f"--expectations={run.expectations_path}",
        f"--results-json={run.results_path}",
        f"--junit-xml={run.junit_path}",
        f"--tier={tier}",
        f"--run-id={run_id}",
        "-o",
        f"junit_suite_name={run.host.name}",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
    ]
    if ssh_config is not None and not run.host.is_local:
        command.append(f"--ssh-config={ssh_config}")
    if select:
        command += ["-k", select]
    return command


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def run_host(
    run: HostRun, *, tier: str, run_id: str, ssh_config: Path | None, select: str | None = None
) -> None:
    """Run pytest for one host and load (or, if it could not run, make up) its document."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    command = pytest_command(run, tier=tier, run_id=run_id, ssh_config=ssh_config, select=select)
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
    if run.returncode not in (0, 1) and not document["run_error"]:
        document = {**document, "run_error": f"pytest exit status {run.returncode}"}
        document["status"] = "error"
    run.document = document


def run(args: argparse.Namespace) -> int:
    """Validate the hosts ``gpufleet validate`` was given; write and show results; exit status."""
    from gpufleet.report.terminal import print_report
    from gpufleet.spec import SpecError

    try:
        hosts = load_hosts(args.inventory, args.limit)
    except InventoryError as exc:
        print(f"gpufleet validate: {exc}", file=sys.stderr)
        return 2
    run_id = new_run_id()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    workdir = Path(tempfile.mkdtemp(prefix="gpufleet-validate-"))
    runs: list[HostRun] = []
    for index, host in enumerate(hosts):
        stem = f"{index:03d}-{safe_name(host.name)}"
        runs.append(
            HostRun(
                host=host,
                alias=f"gpufleet-{index:03d}",
                expectations_path=workdir / f"{stem}.expectations.json",
                results_path=workdir / f"{stem}.results.json",
                junit_path=workdir / f"{stem}.junit.xml",
                log_path=workdir / f"{stem}.log",
            )
        )
    ssh_hosts = [(run.alias, run.host) for run in runs if not run.host.is_local]
    ssh_config = workdir / "ssh_config" if ssh_hosts else None
    if ssh_config is not None:
        ssh_config.write_text(ssh_config_text(ssh_hosts, control_dir=workdir))
    pending = []
    for run in runs:
        try:
            doc = expectations_for(
                run.host,
                tier=args.tier,
                run_id=run_id,
                python=args.python,
                payload_dir=args.payload_dir,
            )
        except SpecError as exc:
            run.document = error_document(
                run, tier=args.tier, run_id=run_id, started_at=started_at, why=str(exc)
            )
            continue
        run.expectations_path.write_text(json.dumps(doc, indent=2))
        pending.append(run)
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            for future in [
                pool.submit(
                    run_host,
                    run,
                    tier=args.tier,
                    run_id=run_id,
                    ssh_config=ssh_config,
                    select=args.select,
                )
                for run in pending
            ]:
                future.result()
    finally:
        if ssh_config is not None:
            close_masters(ssh_config, [alias for alias, _host in ssh_hosts])
    paths = write_results(runs, args.results_dir, run_id)
    junit = args.junit_xml or args.results_dir / "junit" / f"{run_id}.xml"
    merge_junit(runs, junit)
    documents = [run.document for run in runs if run.document is not None]
    notes = baseline_notes(args.results_dir, documents)
    print_report(
        [
            {**doc, "_path": str(path), "_baseline": note}
            for doc, path, note in zip(documents, paths, notes, strict=True)
        ]
    )
    print(f"results: {args.results_dir}/*/{run_id}.json  junit: {junit}")
    shutil.rmtree(workdir, ignore_errors=True)
    return exit_status(documents)
