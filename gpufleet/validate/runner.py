"""The `gpufleet validate` runner: expectations per host, pytest per host over SSH, in parallel."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.text import plain
from gpufleet.validate.calibfile import calibration_for
from gpufleet.validate.checks import parse_select
from gpufleet.validate.hostrun import HostRun, describe_target, error_document
from gpufleet.validate.progress import Progress, document_status
from gpufleet.validate.results import (
    baseline_notes,
    exit_status,
    merge_junit,
    safe_name,
    writable_dir_problem,
    writable_file_problem,
    write_results,
)
from gpufleet.validate.ssh import close_masters, host_problem, ssh_config_text
from gpufleet.validate.suite import (  # noqa: F401  (pytest_command, SUITE_DIR: tests use them)
    HOST_TIMEOUT_S,
    MAX_PARALLEL,
    SUITE_DIR,
    current_check,
    pytest_command,
    run_host,
)


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def expectations_for(
    host: InventoryHost, *, tier: str, run_id: str, python: str | None, payload_dir: str | None
) -> dict[str, Any]:
    """The expectations document for one host; raises SpecError for bad inventory data."""
    from gpufleet.spec import NodeSpec
    from gpufleet.stages.validation_payload import payload_paths
    from validation.verdicts.expectations import Expectations, spec_data

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
        calibration=calibration_for(spec, tier),
    ).to_dict()


def _write_private(path: Path, text: str) -> None:
    """Write a file only this user can read (expectations carry the inventory's data)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _output_problem(args: argparse.Namespace, run_id: str) -> str:
    """Why the results or JUnit file could not be written, found before any host runs."""
    problem = writable_dir_problem(args.results_dir, "--results-dir")
    if not problem and args.junit_xml is not None:
        problem = writable_file_problem(args.junit_xml, "--junit-xml")
    elif not problem:
        problem = writable_file_problem(args.results_dir / "junit" / f"{run_id}.xml", "JUnit XML")
    return problem


def json_summary(shown: list[dict[str, Any]], run_id: str, junit: Path) -> dict[str, Any]:
    """What ``gpufleet validate --json`` prints: per host its status, reason, counts, file."""
    from gpufleet.text import redact_data

    hosts = [
        {
            "host": doc["host"],
            "status": doc["status"],
            "run_error": doc["run_error"],
            "summary": doc["summary"],
            "selection": doc.get("selection"),
            "baseline": doc["_baseline"].get("state"),
            "did_not_run": bool(doc.get("did_not_run")),
            "results": doc["_path"],
        }
        for doc in shown
    ]
    return redact_data({"run_id": run_id, "junit": str(junit), "hosts": hosts})


def run(args: argparse.Namespace) -> int:
    """Validate the hosts ``gpufleet validate`` was given; write and show results; exit status."""
    try:
        hosts = load_hosts(args.inventory, args.limit)
    except InventoryError as exc:
        print(plain(f"gpufleet validate: {exc}"), file=sys.stderr)
        return 2
    args.tier = args.tier or "quick"
    if getattr(args, "scheduler", "none") is None:  # as rollout: the inventory's key
        args.scheduler = str(hosts[0].data.get("scheduler") or "none")
        if args.scheduler != "none" and not getattr(args, "quiet", False):
            print(f"scheduler: {args.scheduler} (the inventory's scheduler key)", file=sys.stderr)
    documents = run_hosts(args, hosts, new_run_id())
    return documents if isinstance(documents, int) else exit_status(documents)


def run_hosts(
    args: argparse.Namespace, hosts: list[InventoryHost], run_id: str
) -> list[dict[str, Any]] | int:
    """One validation run of ``hosts`` at ``args.tier``: results written and shown; the
    documents, or 2 when the results could not be written."""
    from gpufleet.report.terminal import print_report
    from gpufleet.spec import SpecError

    problem = _output_problem(args, run_id)  # before any host runs, not after all of them
    if problem:
        print(plain(f"gpufleet validate: {problem}"), file=sys.stderr)
        return 2
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

    def refuse(run: HostRun, why: str) -> None:
        run.document = error_document(
            run, tier=args.tier, run_id=run_id, started_at=started_at, why=why
        )

    for run in runs:
        why = "" if run.host.is_local else host_problem(run.host)
        if why:  # checked before the ssh_config is written: nothing of it reaches ssh
            refuse(run, why)
    ssh_hosts = [(r.alias, r.host) for r in runs if not r.host.is_local and r.document is None]
    ssh_config = workdir / "ssh_config" if ssh_hosts else None
    if ssh_config is not None:
        _write_private(ssh_config, ssh_config_text(ssh_hosts, control_dir=workdir))
    pending = []
    for run in runs:
        if run.document is not None:
            continue
        try:
            doc = expectations_for(
                run.host,
                tier=args.tier,
                run_id=run_id,
                python=args.python,
                payload_dir=args.payload_dir,
            )
        except SpecError as exc:
            refuse(run, str(exc))
            continue
        except ValueError as exc:  # a value the spec's checks did not foresee: still no traceback
            refuse(run, f"the inventory data could not be read ({exc}); check this host's URLs")
            continue
        _write_private(run.expectations_path, json.dumps(doc, indent=2))
        pending.append(run)
    selection = parse_select(getattr(args, "select", None))
    selects = {run.alias: selection.expression for run in pending}
    slurm = None
    as_jobs = getattr(args, "scheduler", "none") == "slurm"
    # The CLI always says; a caller that does not (rollout) keeps the SSH dispatch.
    as_jobs = as_jobs and getattr(args, "dispatch", "ssh") == "jobs"
    out = sys.stderr if getattr(args, "json", False) else sys.stdout  # --json: stdout is JSON
    if getattr(args, "scheduler", "none") == "slurm":  # gpufleet.scheduler.validate_hook
        from gpufleet.scheduler.validate_hook import SlurmValidate

        slurm = SlurmValidate(workdir, log=lambda line: print(plain(line), file=out))
        if not as_jobs:  # over SSH: hosts running jobs keep them and run no speed workload
            selects = slurm.before(pending, selection.expression)
    by_name = {run.host.name: run for run in runs}
    progress = Progress(
        len(runs),
        args.tier,
        quiet=getattr(args, "quiet", False),
        current=lambda host: current_check(by_name[host], time.time()),
    )
    verbose = getattr(args, "verbose", False)
    for run in runs:
        if run.document is not None:  # refused before it started
            progress.finished(run.host.name, *document_status(run.document))

    def one_host(run: HostRun) -> None:
        progress.started(run.host.name, f"log {run.log_path}" if verbose else "")
        run_host(
            run,
            tier=args.tier,
            run_id=run_id,
            ssh_config=ssh_config,
            select=selects[run.alias],
            checks=selection.names,
            asked=getattr(args, "select", None),
        )
        progress.finished(run.host.name, *document_status(run.document))

    stop_beat = progress.beat_every()
    try:
        if as_jobs:
            from gpufleet.validate.slurm_dispatch import dispatch

            dispatch(
                args,
                pending,
                progress,
                run_id=run_id,
                started_at=started_at,
                workdir=workdir,
                ssh_config=ssh_config,
                selects=selects,
                checks=selection.names,
                log=lambda line: print(plain(line), file=out),
            )
        else:
            workers = args.parallel or min(max(1, len(pending)), MAX_PARALLEL)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for future in [pool.submit(one_host, run) for run in pending]:
                    future.result()
        if slurm is not None:
            slurm.after(pending)
    finally:
        stop_beat()
        if ssh_config is not None:
            close_masters(ssh_config, [alias for alias, _host in ssh_hosts])
    junit = args.junit_xml or args.results_dir / "junit" / f"{run_id}.xml"
    try:
        paths = write_results(runs, args.results_dir, run_id)
    except OSError as exc:  # checked at the start; something changed it since
        print(
            plain(f"gpufleet validate: cannot write results ({exc}); check --results-dir"),
            file=sys.stderr,
        )
        shutil.rmtree(workdir, ignore_errors=True)
        return 2
    junit_problem = ""
    try:
        merge_junit(runs, junit)
    except OSError as exc:  # the results are written: say so, show them, then exit 2
        flag = "--junit-xml" if args.junit_xml else "--results-dir (its junit/ folder)"
        junit_problem = f"gpufleet validate: cannot write {junit} ({exc}); check {flag}"
    documents = [run.document for run in runs if run.document is not None]
    notes = baseline_notes(args.results_dir, documents)
    shown = [
        {**doc, "_path": str(path), "_baseline": note}
        for doc, path, note in zip(documents, paths, notes, strict=True)
    ]
    if getattr(args, "json", False):
        print(json.dumps(json_summary(shown, run_id, junit), indent=2))
    else:
        print_report(shown)
        print(plain(f"results: {args.results_dir}/*/{run_id}.json  junit: {junit}"))
    shutil.rmtree(workdir, ignore_errors=True)
    if junit_problem:
        print(plain(junit_problem), file=sys.stderr)
        return 2
    return documents
