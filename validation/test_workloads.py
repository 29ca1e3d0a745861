"""The TensorFlow workloads, run on the host with the environment's Python; verdicts asserted."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

import pytest

from validation.host.gpu_selection import (
    DOC_SEPARATOR,
    combine_gpus,
    gpus_under_test,
    parallel_command,
    split_documents,
    visible_env,
)
from validation.vendor.nccl_reference import from_run
from validation.verdicts.processes import merge_processes, undecided
from validation.verdicts.runstate import STATE
from validation.verdicts.tiers import BUNDLED, FULL_WORKLOADS, PROCESSES, QUICK_WORKLOADS, TIMEOUT_S


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "workload" in metafunc.fixturenames:
        tier = metafunc.config.stash[STATE].tier
        metafunc.parametrize("workload", QUICK_WORKLOADS if tier == "quick" else FULL_WORKLOADS)


def workload_command(
    name: str,
    *,
    python: str,
    payload_dir: str,
    quick: bool,
    thresholds: dict,
    timeout_s: int,
    gpu: str | None = None,
    extra: dict[str, str] | None = None,
    calibration: dict | None = None,
) -> str:
    """The shell command that runs one workload and prints only its JSON document.

    ``payload_dir`` holds the ``validation`` and ``gpufleet`` packages: the host's
    ``<payload_dir>/current`` (what the validation_payload stage installs) or a checkout; the
    workload runs there with ``PYTHONPATH`` at it. ``gpu``: the CUDA ordinal the workload is
    pinned to (validation.host.gpu_selection); ``extra``: more ``--option value`` pairs.

    Example: ``workload_command("xla", python="/opt/env/bin/python",
    payload_dir="/opt/gpufleet/validation/current", quick=True, thresholds={}, timeout_s=300)``
    """
    payload = shlex.quote(payload_dir)
    args = [shlex.quote(python), "-m", f"validation.workloads.{name}", "--json", '"$f"']
    args += _tier_args(quick, thresholds, calibration)
    for option, value in (extra or {}).items():
        args += [shlex.quote(option), shlex.quote(value)]
    pin = "".join(f"{k}={shlex.quote(v)} " for k, v in visible_env(gpu).items())
    return (
        f"f=$(mktemp) && cd {payload} && PYTHONPATH={payload} TF_CPP_MIN_LOG_LEVEL=2 {pin}"
        f"timeout {int(timeout_s)} {' '.join(args)} >/dev/null; rc=$?; "
        'cat "$f" 2>/dev/null; rm -f "$f"; exit $rc'
    )


def _tier_args(quick: bool, thresholds: dict, calibration: dict | None) -> list[str]:
    """The options every workload entry point takes: --quick, --thresholds, --calibration."""
    args = ["--quick"] if quick else []
    if thresholds:
        args += ["--thresholds", shlex.quote(json.dumps(thresholds))]
    if calibration:
        args += ["--calibration", shlex.quote(json.dumps(calibration))]
    return args


def bundle_command(
    names: Sequence[str],
    *,
    python: str,
    payload_dir: str,
    quick: bool,
    thresholds: dict,
    timeout_s: int,
    calibration: dict | None = None,
) -> str:
    """The shell command that runs ``names`` in one process (validation.workloads.bundle) and
    prints each one's document in that order, each followed by DOC_SEPARATOR (an empty one
    where it wrote none); exits with the bundle's status."""
    payload = shlex.quote(payload_dir)
    args = [shlex.quote(python), "-m", "validation.workloads.bundle", "--json-dir", '"$d"']
    args += [
        "--workloads",
        shlex.quote(",".join(names)),
        *_tier_args(quick, thresholds, calibration),
    ]
    shown = " ".join(
        f'cat "$d/{n}.json" 2>/dev/null; printf "\\n%s\\n" "{DOC_SEPARATOR}";' for n in names
    )
    return (
        f"d=$(mktemp -d) && cd {payload} && PYTHONPATH={payload} TF_CPP_MIN_LOG_LEVEL=2 "
        f"CUDA_DEVICE_ORDER=PCI_BUS_ID timeout {int(timeout_s)} {' '.join(args)} >/dev/null; "
        f'rc=$?; {shown} rm -rf "$d"; exit $rc'
    )


def bundle_documents(host: Any, names: Sequence[str], command: str) -> tuple[dict, str]:
    """Run the bundle once: workload -> its document (None where it wrote none), and how the
    process ended (exit status and the last log lines) for a test that got none."""
    result = host.run(command)
    docs: dict[str, dict[str, Any] | None] = {}
    for name, text in split_documents(result.stdout, list(names)).items():
        try:
            docs[name] = json.loads(text) if text else None
        except json.JSONDecodeError:
            docs[name] = None
    timed_out = " (timed out)" if result.rc == 124 else ""
    log_tail = "\n".join(result.stderr.strip().splitlines()[-6:])
    return docs, f"exit {result.rc}{timed_out}; last log lines:\n{log_tail}"


def _processes(host: Any, workload: str, command: str, tier: str, gpu: str | None) -> dict:
    """The workload's document over fresh processes (more only while a speed verdict is at
    stake, validation.verdicts.processes); pytest.fail when a process printed no document."""
    docs: list[dict[str, Any]] = []
    merged: dict[str, Any] | None = None
    while len(docs) < PROCESSES[tier] and (merged is None or undecided(merged)):
        result = host.run(command)
        log_tail = "\n".join(result.stderr.strip().splitlines()[-6:])
        try:
            docs.append(json.loads(result.stdout))
        except json.JSONDecodeError:
            timed_out = " (timed out)" if result.rc == 124 else ""
            on = f" on GPU {gpu}" if gpu is not None else ""
            pytest.fail(
                f"{workload} process {len(docs) + 1}{on} printed no JSON document (exit "
                f"{result.rc}{timed_out}); last log lines:\n{log_tail}"
            )
        merged = merge_processes(docs, looks=PROCESSES[tier])
    assert merged is not None
    return merged


def _parallel_processes(
    host: Any, workload: str, commands: dict[str | None, str], tier: str
) -> dict[str, dict[str, Any]]:
    """One document per GPU from processes run on every GPU at once (validation.host.gpu_selection),
    as many rounds as _processes would run for any of them."""
    ordinals = sorted((str(g) for g in commands), key=int)
    docs: dict[str, list[dict[str, Any]]] = {o: [] for o in ordinals}
    command = parallel_command({o: commands[o] for o in ordinals})
    rounds = 0
    merged: dict[str, dict[str, Any]] = {}
    while rounds < PROCESSES[tier] and (rounds == 0 or any(map(undecided, merged.values()))):
        rounds += 1
        result = host.run(command)
        for ordinal, text in split_documents(result.stdout, ordinals).items():
            try:
                docs[ordinal].append(json.loads(text))
            except json.JSONDecodeError:
                log_tail = "\n".join(result.stderr.strip().splitlines()[-6:])
                pytest.fail(
                    f"{workload} process {rounds} on GPU {ordinal} printed no JSON document; "
                    f"last log lines:\n{log_tail}"
                )
        merged = {o: merge_processes(d, looks=PROCESSES[tier]) for o, d in docs.items()}
    return merged


def test_workload(
    host: Any,
    workload: str,
    env_python: str,
    payload_dir: str,
    spec: Any,
    tier: str,
    info: Any,
    run_state: Any,
    record: Any,
    expectations: Any,
) -> None:
    bundled = BUNDLED.get(tier, ())
    if workload in bundled:
        if run_state.bundle is None:
            command = bundle_command(
                bundled,
                python=env_python,
                payload_dir=payload_dir,
                quick=tier == "quick",
                thresholds=dict(spec.thresholds),
                timeout_s=TIMEOUT_S[tier] * len(bundled),
                calibration=expectations.calibration,
            )
            run_state.bundle, run_state.bundle_end = bundle_documents(host, bundled, command)
        found = run_state.bundle.get(workload)
        if found is None:
            pytest.fail(
                f"{workload}: the tier's one process (validation.workloads.bundle) wrote no "
                f"document for it ({run_state.bundle_end})"
            )
        gpus = gpus_under_test(workload, tier, len(info.gpus_on_bus))
        doc = merge_processes([found])
        if gpus != [None]:
            doc = combine_gpus({str(gpus[0]): doc})
        judge_document(workload, doc, run_state, record)
        return
    extra = {}
    nccl_tests = from_run(run_state) if workload == "allreduce" else None
    if nccl_tests is not None:  # measured by test_vendor_diagnostics earlier in this run
        extra["--nccl-tests"] = json.dumps(nccl_tests)
    commands = {
        gpu: workload_command(
            workload,
            python=env_python,
            payload_dir=payload_dir,
            quick=tier == "quick",
            thresholds=dict(spec.thresholds),
            timeout_s=TIMEOUT_S[tier],
            gpu=gpu,
            extra=extra,
            calibration=expectations.calibration,
        )
        for gpu in gpus_under_test(workload, tier, len(info.gpus_on_bus))
    }
    if None in commands:
        doc = _processes(host, workload, commands[None], tier, None)
    elif len(commands) == 1:
        (gpu, command), *_ = commands.items()
        doc = combine_gpus({str(gpu): _processes(host, workload, command, tier, gpu)})
    else:
        doc = combine_gpus(_parallel_processes(host, workload, commands, tier))
    judge_document(workload, doc, run_state, record)


def judge_document(workload: str, doc: dict[str, Any], run_state: Any, record: Any) -> None:
    """Record a workload's document and assert its verdict (xfail: inconclusive, skip: n/a)."""
    run_state.workloads.append(doc)
    verdict = doc.get("verdict") or {}
    status, reason = verdict.get("status"), verdict.get("reason", "")
    record(reason, **(doc.get("metrics") or {}))
    failed_checks = [
        f"{c.get('name')}: {c.get('reason')}"
        for c in doc.get("checks") or ()
        if c.get("status") == "fail"
    ]
    assert not failed_checks, f"{workload}: " + "; ".join(failed_checks)
    assert status != "fail", f"{workload}: {reason}"
    if status == "inconclusive":
        pytest.xfail(f"inconclusive: {reason}")
    if status == "not_applicable":
        pytest.skip(f"not applicable: {reason}")
    assert status == "pass", f"{workload}: unknown verdict {status!r} ({reason})"
