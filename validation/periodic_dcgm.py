"""The periodic run's DCGM check: `dcgmi diag -r 1 -j` (seconds, software checks only)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from validation.periodic_checks import check_entry, nvidia_gpus_on_bus
from validation.vendor_runs import DCGM_OFF, DCGM_TIMEOUT_S, DCGMI_MISSING

NAME = "vendor_diagnostics::dcgm_diag"
LEVEL = 1  # the periodic run never stresses GPUs that user jobs may be using
# A verdict's status -> the results document's check status.
STATUS = {"pass": "pass", "fail": "fail", "error": "fail", "skip": "skipped", "warn": "pass"}


def _run(command: list[str], timeout: int) -> tuple[int | None, str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return done.returncode, done.stdout


def dcgm_check(
    data: dict[str, Any],
    run: Callable[[list[str], int], tuple[int | None, str]] = _run,
    gpus_on_bus: Callable[[], int] = nvidia_gpus_on_bus,
) -> dict[str, Any]:
    """The DCGM level-1 check as the results document lists it (``run`` and ``gpus_on_bus``
    are this host's; tests pass recorded ones).

    Example: ``dcgm_check({"dcgm": "auto"})["status"]`` -> ``"skipped"`` on a GPU-less host.
    """
    from gpufleet.parsers import parse_dcgm_diag
    from gpufleet.vendor import judge_dcgm

    if data.get("dcgm") == "off":
        return check_entry(NAME, "skipped", DCGM_OFF)
    if not gpus_on_bus():
        verdict = judge_dcgm(None, gpu_present=False, level=LEVEL)
        return check_entry(NAME, "skipped", verdict.reason)
    if shutil.which("dcgmi") is None:
        return check_entry(NAME, "fail", DCGMI_MISSING)
    mig_rc, mig = run(["nvidia-smi", "--query-gpu=mig.mode.current", "--format=csv,noheader"], 60)
    if mig_rc == 0 and "Enabled" in mig:
        verdict = judge_dcgm(None, mig_enabled=True, level=LEVEL)
    else:
        rc, output = run(["dcgmi", "diag", "-r", str(LEVEL), "-j"], DCGM_TIMEOUT_S[LEVEL])
        verdict = judge_dcgm(parse_dcgm_diag(output, rc), level=LEVEL)
    figures = {k: v for k, v in verdict.figures.items() if k in ("failed", "skipped", "warnings")}
    return check_entry(NAME, STATUS.get(verdict.status, "fail"), verdict.reason, **figures)
