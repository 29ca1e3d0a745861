"""The periodic run's DCGM check: `dcgmi diag -r 1 -j` (seconds, software checks only)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from validation.periodic.checks import check_entry, nvidia_gpus_on_bus
from validation.vendor.runs import DCGM_OFF, DCGM_TIMEOUT_S, DCGMI_MISSING

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
    """The DCGM level-1 check as the results document lists it (see :func:`dcgm_run`).

    Example: ``dcgm_check({"dcgm": "auto"})["status"]`` -> ``"skipped"`` on a GPU-less host.
    """
    return dcgm_run(data, run, gpus_on_bus)[0]


def dcgm_run(
    data: dict[str, Any],
    run: Callable[[list[str], int], tuple[int | None, str]] = _run,
    gpus_on_bus: Callable[[], int] = nvidia_gpus_on_bus,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The DCGM level-1 check and the results' ``vendor.dcgm`` section (``run`` and
    ``gpus_on_bus`` are this host's; tests pass recorded ones)."""
    from gpufleet.parsers import parse_dcgm_diag
    from gpufleet.vendor import Verdict, judge_dcgm
    from gpufleet.vendor.section import dcgm_section

    result = None
    if data.get("dcgm") == "off":
        verdict = Verdict("dcgm_diag", "skip", DCGM_OFF)
    elif not gpus_on_bus():
        verdict = judge_dcgm(None, gpu_present=False, level=LEVEL)
    elif shutil.which("dcgmi") is None:
        verdict = Verdict("dcgm_diag", "fail", DCGMI_MISSING)
    else:
        mig_rc, mig = run(
            ["nvidia-smi", "--query-gpu=mig.mode.current", "--format=csv,noheader"], 60
        )
        if mig_rc == 0 and "Enabled" in mig:
            verdict = judge_dcgm(None, mig_enabled=True, level=LEVEL)
        else:
            rc, output = run(["dcgmi", "diag", "-r", str(LEVEL), "-j"], DCGM_TIMEOUT_S[LEVEL])
            result = parse_dcgm_diag(output, rc)
            verdict = judge_dcgm(result, level=LEVEL)
    figures = {k: v for k, v in verdict.figures.items() if k in ("failed", "skipped", "warnings")}
    check = check_entry(NAME, STATUS.get(verdict.status, "fail"), verdict.reason, **figures)
    return check, dcgm_section(verdict, level=LEVEL, result=result)
