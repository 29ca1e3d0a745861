"""The checks a periodic run makes: GPU health from nvidia-smi, and the tier's workloads."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet import health
from gpufleet.compat import zip_strict
from validation.verdicts.tiers import PROCESSES, TIMEOUT_S

# The folder that holds the validation package (validation/periodic/checks.py: three up).
PAYLOAD_ROOT = Path(__file__).resolve().parents[2]
NVIDIA_SMI_TIMEOUT_S = 60
# The suite checks these under load (a matmul on every GPU); a periodic run samples idle.
UNDER_LOAD_CHECKS = ("clocks_not_throttled_under_load", "pcie_link_at_max_under_load")
PCI_DEVICES = Path("/sys/bus/pci/devices")


def check_entry(name: str, status: str, message: str = "", **figures: Any) -> dict[str, Any]:
    """One check as the results document lists it."""
    return {
        "name": name,
        "status": status,
        "message": message,
        "figures": figures,
        "duration_s": 0.0,
    }


# ------------------------------------------------------------------------------- GPU health


def nvidia_gpus_on_bus() -> int:
    """NVIDIA display controllers (vendor 0x10de, class 0x03xxxx) in sysfs."""
    count = 0
    for device in PCI_DEVICES.glob("*"):
        try:
            vendor = (device / "vendor").read_text().strip()
            pci_class = (device / "class").read_text().strip()
        except OSError:
            continue
        count += vendor == "0x10de" and pci_class.startswith("0x03")
    return count


def gpu_health_checks(
    data: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The suite's idle GPU health checks from ``nvidia-smi -q -x``, and the gpu_health section."""
    names = ("gpu_count", "no_uncorrectable_ecc", "no_row_remap_pending_or_failed")
    expected = data.get("gpu_count")
    smi_path = shutil.which("nvidia-smi")
    under_load = [
        check_entry(
            f"gpu_health::{name}",
            "skipped",
            "checked under load by `gpufleet validate`; the periodic run samples idle GPUs",
        )
        for name in UNDER_LOAD_CHECKS
    ]
    if data.get("gpu_less") and not nvidia_gpus_on_bus():
        # As the suite does: no GPU to check. Only on a host declared GPU-less, so that a GPU
        # fallen off the bus of a GPU server still fails. The driver's tools may be installed
        # (nvidia-smi then fails "couldn't communicate with the NVIDIA driver").
        why = "no GPU: the host is GPU-less (gpu_less) and has no NVIDIA GPU on the PCI bus"
        return [check_entry(f"gpu_health::{n}", "skipped", why) for n in names] + under_load, None
    if smi_path is None:
        if data.get("gpu_less") or not expected:
            why = "no GPU: nvidia-smi is not on PATH (no NVIDIA driver); GPU health not checked"
            return [
                check_entry(f"gpu_health::{n}", "skipped", why) for n in names
            ] + under_load, None
        why = f"nvidia-smi is not on PATH, but {expected} GPU(s) are expected: is the driver in?"
        return [check_entry(f"gpu_health::{n}", "fail", why) for n in names] + under_load, None
    try:
        proc = subprocess.run(
            [smi_path, "-q", "-x"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"nvidia-smi -q -x exited {proc.returncode}: "
                f"{(proc.stdout + proc.stderr).strip()[:300]}"
            )
        from gpufleet.parsers import parse_nvidia_smi_xml

        smi = parse_nvidia_smi_xml(proc.stdout)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired, OSError) as exc:
        why = f"GPU health unknown: {exc}"
        return [check_entry(f"gpu_health::{n}", "fail", why) for n in names] + under_load, None
    findings = health.evaluate_idle(smi, expected)
    section = {
        "gpus": health.gpu_summary(smi),
        "findings": [f.to_dict() for f in findings],
        "driver_version": health.field_of(smi, "driver_version"),
        "cuda_version": health.field_of(smi, "cuda_version"),
    }
    checks = []
    for name, finding_check in zip_strict(names, ("gpu_count", "ecc", "row_remap")):
        bad = health.failures(findings, finding_check)
        seen = [f.message for f in findings if f.check == finding_check]
        checks.append(
            check_entry(
                f"gpu_health::{name}",
                "fail" if bad else "pass",
                "; ".join(f.message for f in bad),
                findings=seen,
                **({"nvidia_smi": len(section["gpus"])} if name == "gpu_count" else {}),
            )
        )
    return checks + under_load, section


# -------------------------------------------------------------------------------- workloads


def workload_command(
    name: str, *, python: str, json_path: Path, quick: bool, thresholds: dict[str, Any]
) -> list[str]:
    """The argv of one workload run, e.g. ``[python, "-m", "validation.workloads.xla", ...]``."""
    command = [python, "-m", f"validation.workloads.{name}", "--json", str(json_path)]
    if quick:
        command.append("--quick")
    if thresholds:
        command += ["--thresholds", json.dumps(thresholds)]
    return command


def judge_workload(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The check for one workload document, as the suite's test_workload decides it."""
    verdict = doc.get("verdict") or {}
    status, reason = str(verdict.get("status")), str(verdict.get("reason", ""))
    figures = dict(doc.get("metrics") or {})
    failed = [
        f"{c.get('name')}: {c.get('reason')}"
        for c in doc.get("checks") or ()
        if c.get("status") == "fail"
    ]
    if failed:
        return check_entry(f"workloads::{name}", "fail", f"{name}: " + "; ".join(failed), **figures)
    mapped = {
        "pass": ("pass", reason),
        "fail": ("fail", f"{name}: {reason}"),
        "inconclusive": ("inconclusive", f"inconclusive: {reason}"),
        "not_applicable": ("skipped", f"not applicable: {reason}"),
    }
    state, message = mapped.get(status, ("error", f"{name}: unknown verdict {status!r}"))
    return check_entry(f"workloads::{name}", state, message, **figures)


def _one_process(
    name: str,
    *,
    args: argparse.Namespace,
    thresholds: dict[str, Any],
    log_path: Path,
    gpu: str | None = None,
) -> tuple[dict[str, Any] | None, int | str]:
    """Run the workload once in a subprocess (pinned to CUDA ordinal ``gpu`` when given): its
    document (None when it wrote none), exit."""
    from validation.host.gpu_selection import visible_env

    env = visible_env(gpu)
    with tempfile.TemporaryDirectory(prefix="gpufleet-periodic-") as tmp:
        json_path = Path(tmp) / f"{name}.json"
        command = workload_command(
            name,
            python=args.python,
            json_path=json_path,
            quick=args.tier == "quick",
            thresholds=thresholds,
        )
        rc = _spawn(command, args, log_path, env, args.timeout or TIMEOUT_S[args.tier])
        return _read_document(json_path), rc


def _spawn(
    command: list[str], args: argparse.Namespace, log_path: Path, env: dict[str, str], timeout: int
) -> int | str:
    """Run ``command`` in the payload folder, its log appended to ``log_path``: its exit status,
    or why it did not end by itself."""
    env = {**os.environ, "PYTHONPATH": str(PAYLOAD_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", **env}
    with log_path.open("a") as log:
        try:
            proc = subprocess.run(
                command,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=PAYLOAD_ROOT,
                env=env,
                timeout=timeout,
                check=False,
            )
            return proc.returncode
        except subprocess.TimeoutExpired:
            return f"killed after {timeout} s"
        except OSError as exc:
            return f"could not start {args.python}: {exc}"


def _read_document(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and "verdict" in doc else None


def run_bundle(
    names: Sequence[str], *, args: argparse.Namespace, thresholds: dict[str, Any], log_dir: Path
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Run ``names`` in one process (validation.workloads.bundle), as the suite runs the quick
    tier: each one's check and document (None where it wrote none), in order."""
    from validation.host.gpu_selection import combine_gpus, gpus_under_test
    from validation.verdicts.processes import merge_processes

    log_path = log_dir / "bundle.log"
    log_path.write_text("")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpufleet-periodic-") as tmp:
        command = [args.python, "-m", "validation.workloads.bundle", "--json-dir", tmp]
        command += ["--workloads", ",".join(names)]
        command += ["--quick"] if args.tier == "quick" else []
        command += ["--thresholds", json.dumps(thresholds)] if thresholds else []
        limit = (args.timeout or TIMEOUT_S[args.tier]) * len(names)
        rc = _spawn(command, args, log_path, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, limit)
        found = {n: _read_document(Path(tmp) / f"{n}.json") for n in names}
    took = round(time.monotonic() - started, 3)
    done: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for name in names:
        doc = found[name]
        if doc is None:
            tail = "\n".join(log_path.read_text(errors="replace").strip().splitlines()[-6:])
            check = check_entry(
                f"workloads::{name}",
                "error",
                f"{name}: the tier's one process wrote no JSON document for it (exit {rc}); "
                f"log {log_path}:\n{tail}",
            )
        else:
            doc = merge_processes([doc])
            gpus = gpus_under_test(name, args.tier, nvidia_gpus_on_bus())
            if gpus != [None]:
                doc = combine_gpus({str(gpus[0]): doc})
            check = judge_workload(name, doc)
        check["duration_s"] = took  # one process for all of them
        done.append((check, doc))
    return done


def gpus_busy(data: dict[str, Any]) -> str | None:
    """``GPU busy (PIDs ...)`` when a user's job holds or drives a GPU (validation.host.gpu_busy):
    the periodic run then starts no workload, so it never disturbs the job. None on a GPU-less
    host (nothing to disturb) and on an idle one."""
    if data.get("gpu_less") or nvidia_gpus_on_bus() == 0:
        return None
    from validation.host.gpu_busy import check_with_nvidia_smi

    return check_with_nvidia_smi()


def busy_check(name: str, busy: str) -> dict[str, Any]:
    """The check of a workload not started because the GPUs are busy: inconclusive, not a fail."""
    return check_entry(
        f"workloads::{name}",
        "inconclusive",
        f"inconclusive: {busy}; {name} not run, so as not to disturb that job",
    )


def run_workload(
    name: str, *, args: argparse.Namespace, thresholds: dict[str, Any], log_dir: Path
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run one workload in fresh processes (validation.verdicts.tiers.PROCESSES while a speed
    verdict is at stake, as the suite does); its check and the merged document (None when a
    process wrote none)."""
    # Imported here: it needs numpy, which the workloads' Python has and the rest of the
    # periodic runner does without.
    from validation.host.gpu_selection import combine_gpus, gpus_under_test
    from validation.verdicts.processes import merge_processes, undecided

    log_path = log_dir / f"{name}.log"
    log_path.write_text("")
    started = time.monotonic()
    by_gpu: dict[str, dict[str, Any]] = {}
    merged: dict[str, Any] = {}
    # Single-GPU workloads run pinned to one GPU (quick) or to each in turn (full).
    for gpu in gpus_under_test(name, args.tier, nvidia_gpus_on_bus()):
        docs: list[dict[str, Any]] = []
        merged = {}
        while len(docs) < PROCESSES[args.tier] and (not docs or undecided(merged)):
            doc, rc = _one_process(
                name, args=args, thresholds=thresholds, log_path=log_path, gpu=gpu
            )
            if doc is None:
                tail = "\n".join(log_path.read_text(errors="replace").strip().splitlines()[-6:])
                on = f" on GPU {gpu}" if gpu is not None else ""
                check = check_entry(
                    f"workloads::{name}",
                    "error",
                    f"{name} process {len(docs) + 1}{on} wrote no JSON document (exit {rc}); "
                    f"log {log_path}:\n{tail}",
                )
                check["duration_s"] = round(time.monotonic() - started, 3)
                return check, None
            docs.append(doc)
            merged = merge_processes(docs, looks=PROCESSES[args.tier])
        if gpu is not None:
            by_gpu[gpu] = merged
    if by_gpu:
        merged = combine_gpus(by_gpu)
    check = judge_workload(name, merged)
    check["duration_s"] = round(time.monotonic() - started, 3)
    return check, merged


# ----------------------------------------------------------------------------- the results
