"""DCGM's own error lines from a ``dcgmi diag`` that could not run, and the fix for known ones."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The words DCGM prints are quoted from NVIDIA/DCGM's source (dcgmi/Command.cpp, dcgmi/Diag.cpp,
# nvvs/src/NvidiaValidationSuite.cpp, nvvs/include/TestFramework.inl, dcgmlib/src/dcgm_errors.c,
# tag 4.6.0, commit 72fa3fea) and, where ``recorded``, seen in a captured run
# (tests/fixtures/dcgm/SOURCES.md). Patterns are matched case-insensitively; none holds an
# unbounded repeat, so `gpufleet diagnose` can use them as they are.


@dataclass(frozen=True)
class DcgmError:
    """A DCGM error that stops the diagnostic before any test runs."""

    code: str
    message: str  # what it means, one sentence
    fix: str
    patterns: tuple[str, ...]
    recorded: bool  # a captured public run holds it (else the words come from DCGM's source)


DCGM_ERRORS: tuple[DcgmError, ...] = (
    DcgmError(
        "dcgm-hostengine-unreachable",
        "dcgmi could not reach the DCGM host engine (nv-hostengine): the nvidia-dcgm service is "
        "not running, or listens elsewhere.",
        "Start the host engine and keep it running: `sudo systemctl enable --now nvidia-dcgm`, "
        "check `systemctl status nvidia-dcgm` and `dcgmi discovery -l`, then run dcgmi diag again.",
        (
            r"unable to establish a connection to the specified host",
            r"Unable to connect to host engine",
            r"Unable to start an embedded host engine",
            r"Host engine connection invalid/disconnected",
        ),
        True,
    ),
    DcgmError(
        "dcgm-diag-mig-enabled",
        "dcgmi diag refuses GPUs in MIG mode: the diagnostic needs the whole GPU.",
        "Leave MIG mode on the GPUs to test (`sudo nvidia-smi -i <gpu> -mig 0`, then reset the GPU "
        "or reboot), or run the diagnostic only on GPUs with MIG off (`dcgmi diag -i <gpus>`).",
        (
            r"MIG configuration is incompatible with the diagnostic",
            r"CUDA does not support enumerating GPUs with MIG mode enabled",
        ),
        True,
    ),
    DcgmError(
        "dcgm-diag-group-empty",
        "dcgmi diag was pointed at a GPU group that holds no GPU it can test.",
        "List the groups and GPUs (`dcgmi group -l`, `dcgmi discovery -l`) and run the "
        "diagnostic on a group with GPUs in it, or without `-g` to test every GPU.",
        (r"The specified group is empty",),
        True,
    ),
    DcgmError(
        "dcgm-diag-cuda-unsupported",
        "The DCGM diagnostic does not support the CUDA version of this driver: the installed DCGM "
        "is older than the driver's CUDA major.",
        "Install the DCGM package for the driver's CUDA major "
        "(`datacenter-gpu-manager-4-cuda<major>`, the major from nvidia-smi's 'CUDA Version'), "
        "or a DCGM release that supports it.",
        (r"Detected unsupported Cuda version",),
        True,
    ),
    DcgmError(
        "dcgm-diag-plugins-missing",
        "The DCGM diagnostic found no plugin directory for this driver's CUDA major (the "
        "datacenter-gpu-manager-4-cuda<major> package is missing or for another major).",
        "Install `datacenter-gpu-manager-4-cuda<major>` for the driver's CUDA major (nvidia-smi's "
        "'CUDA Version') and remove the package of the other major; restart nvidia-dcgm.",
        (
            r"Plugins directory was not found",
            r"Cannot load plugins",
            r"unable to open the plugin dir",
        ),
        False,
    ),
    DcgmError(
        "dcgm-nvvs-missing",
        "The DCGM diagnostic binary (nvvs) is not installed where the host engine looks for it.",
        "Install the DCGM diagnostic (DCGM 4: `datacenter-gpu-manager-4-cuda<major>`; DCGM 3: "
        "`datacenter-gpu-manager`) and restart nvidia-dcgm; images such as dcgm-exporter's ship "
        "without it, so run the diagnostic from the standalone DCGM image or the host.",
        (r"nvvs binary was not found",),
        True,
    ),
    DcgmError(
        "dcgm-diag-not-root",
        "The DCGM diagnostic lacks the privileges it needs (dcgmi or nv-hostengine not run as "
        "root).",
        "Run `sudo dcgmi diag` and keep the nvidia-dcgm service running as root.",
        (r"Host engine is running as non-root", r"\bNo permission\b"),
        False,
    ),
    DcgmError(
        "dcgm-diag-driver-unsupported",
        "The DCGM diagnostic runs only with NVIDIA's data-centre (Tesla) driver.",
        "Install a data-centre driver branch for these GPUs (`gpufleet matrix` resolves one).",
        (r"Tesla recommended driver is not being used",),
        False,
    ),
)
_COMPILED = tuple(
    (error, tuple(re.compile(pattern, re.IGNORECASE) for pattern in error.patterns))
    for error in DCGM_ERRORS
)
_ERROR_PREFIX = re.compile(r"^(?:Error|Err):", re.IGNORECASE)
MAX_LINES = 5  # DCGM's lines relayed in one message
MAX_LINE = 400  # characters kept of each


def known_error(text: str) -> DcgmError | None:
    """The first known DCGM error whose words appear in ``text``.

    >>> known_error("Error: Unable to connect to host engine. Host engine ...").code
    'dcgm-hostengine-unreachable'
    """
    for error, patterns in _COMPILED:
        if any(pattern.search(text) for pattern in patterns):
            return error
    return None


def dcgm_lines(text: str) -> list[str]:
    """The lines outside any results table that DCGM printed as errors, stripped, each once:
    those that begin ``Error:`` (dcgmi) and those that hold a known error's words (nvvs
    prints some without a prefix)."""
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("|", "+")) or line in found:
            continue
        if _ERROR_PREFIX.match(line) or known_error(line) is not None:
            found.append(line)
    return found


def relay(lines: list[str], *, lead: str) -> str:
    """``lead``, DCGM's own lines verbatim (at most ``MAX_LINES``), and the fix when known."""
    kept = [line[:MAX_LINE] for line in lines[:MAX_LINES]]
    more = len(lines) - len(kept)
    said = " / ".join(kept) + (f" / and {more} more line(s)" if more > 0 else "")
    error = known_error("\n".join(lines))
    fix = f"; fix: {error.fix}" if error else ""
    return f"{lead}{said}{fix}"


def with_fix(reason: str) -> str:
    """``reason`` with the fix of the known DCGM error it names, if any."""
    error = known_error(reason)
    return f"{reason}; fix: {error.fix}" if error else reason
