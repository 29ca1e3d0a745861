"""Recognise known failure signatures (GPU driver, CUDA, TensorFlow, provisioning) in logs."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from gpufleet.parsers.dcgm_errors import DCGM_ERRORS
from gpufleet.parsers.diagnosis_deploy import DEPLOY_CODES, DEPLOY_PATTERNS

SEVERITIES = ("error", "warning", "info")

# code -> (severity, one-line message, fix). Stable: docs/reference/diagnose-codes.md and
# results JSON refer to these codes; add new ones, never rename.
DIAGNOSIS_CODES: dict[str, tuple[str, str, str]] = {
    "nvml-driver-library-mismatch": (
        "error",
        "The loaded NVIDIA kernel module and the user-space driver libraries have different "
        "versions (usually a driver upgrade without a reboot).",
        "Reboot the host, or unload the old modules (`sudo rmmod nvidia_uvm nvidia_drm "
        "nvidia_modeset nvidia`) and run nvidia-smi again; keep a single driver branch "
        "installed and pinned.",
    ),
    "nvidia-smi-no-driver": (
        "error",
        "nvidia-smi cannot talk to the NVIDIA kernel driver: the module is not loaded.",
        "Check `dkms status`, `lsmod | grep nvidia` and `sudo dmesg | grep -i nvrm`, then "
        "`sudo modprobe nvidia`; a Secure Boot key rejection, a failed DKMS build or nouveau "
        "holding the GPU are the usual causes (see the other findings).",
    ),
    "nvidia-smi-no-nvml-library": (
        "error",
        "nvidia-smi cannot find libnvidia-ml.so: the driver's user-space libraries are "
        "missing or not visible (common inside containers).",
        "Install the driver's utils/compute packages on the host (e.g. nvidia-utils-<branch>, "
        "libnvidia-compute-<branch>); in a container, run it with the NVIDIA Container "
        "Toolkit (`--gpus all`) so the host libraries are mounted.",
    ),
    "secure-boot-key-rejected": (
        "error",
        "Secure Boot refused to load a kernel module signed with a key it does not trust.",
        "Enroll the DKMS signing key (`sudo mokutil --import /var/lib/dkms/mok.pub`, then "
        "confirm it in MOK Manager at the next boot), use the distribution's signed "
        "precompiled NVIDIA modules, or disable Secure Boot in the firmware.",
    ),
    "dkms-build-failed": (
        "error",
        "DKMS could not build the NVIDIA kernel module for this kernel.",
        "Install the headers of the running kernel (`sudo apt-get install "
        "linux-headers-$(uname -r)`), read /var/lib/dkms/nvidia/<version>/build/make.log, "
        "and use a driver branch that supports this kernel version.",
    ),
    "nouveau-owns-gpu": (
        "error",
        "The NVIDIA driver could not claim the GPUs because another driver (nouveau, "
        "nvidiafb, ...) already owns them.",
        "Blacklist nouveau (`echo 'blacklist nouveau' | sudo tee "
        "/etc/modprobe.d/blacklist-nouveau.conf`, add `options nouveau modeset=0`), run "
        "`sudo update-initramfs -u` and reboot.",
    ),
    "gpu-unsupported-by-driver": (
        "error",
        "This driver release does not support the installed GPU.",
        "Pick a driver branch that lists this GPU (older GPUs need a legacy branch, newer "
        "ones a newer branch); `gpufleet matrix` resolves a branch for the GPU's PCI id.",
    ),
    "apt-held-broken-packages": (
        "error",
        "apt could not resolve the package set: held or conflicting packages block the "
        "install (usually two driver branches or a pinned older version).",
        "Show the conflict with `apt-mark showhold` and `apt-get install -s <package>`; "
        "unhold (`apt-mark unhold`) or purge the other driver branch's packages, then retry.",
    ),
    "tf-cuda-driver-not-found": (
        "error",
        "TensorFlow could not load or initialise the CUDA driver (libcuda / cuInit), so it "
        "runs on the CPU only.",
        "Make sure `nvidia-smi` works on this host first; then check that libcuda.so.1 is "
        "visible to the process (`ldconfig -p | grep libcuda`) and that the process can open "
        "/dev/nvidia* (CUDA_VISIBLE_DEVICES not empty, container started with GPUs).",
    ),
    "tf-cannot-dlopen": (
        "error",
        "TensorFlow found the driver but not its CUDA libraries (cudart, cublas, cudnn, ...) "
        "and skipped registering the GPUs.",
        "Install the CUDA wheels that match the TensorFlow version "
        "(`pip install 'tensorflow[and-cuda]==<version>'`, pinned with `gpufleet matrix`); "
        "the 'Could not load dynamic library' lines above name the missing one.",
    ),
    "cudnn-version-mismatch": (
        "error",
        "The cuDNN library loaded at run time is older than the one TensorFlow was built against.",
        "Install the cuDNN version TensorFlow expects (nvidia-cudnn-cu12==<version> from "
        "`gpufleet matrix`) and make sure no older libcudnn on LD_LIBRARY_PATH shadows it.",
    ),
    "xla-libdevice-not-found": (
        "error",
        "XLA could not find libdevice.10.bc, so GPU kernels that need it fail to compile.",
        "Install the CUDA NVVM pieces (`pip install nvidia-cuda-nvcc-cu12` in the TF "
        "environment, or the cuda-nvcc apt package) and set "
        "`XLA_FLAGS=--xla_gpu_cuda_data_dir=<dir containing nvvm/libdevice>`.",
    ),
    "xla-libdevice-dir-missing": (
        "warning",
        "XLA cannot find the CUDA libdevice directory; compilation fails later if a kernel "
        "needs libdevice.",
        "Set `XLA_FLAGS=--xla_gpu_cuda_data_dir=<CUDA dir containing nvvm/libdevice>` or "
        "install nvidia-cuda-nvcc-cu12 in the TF environment.",
    ),
    "ptxas-not-found": (
        "error",
        "XLA found no ptxas (or other PTX compiler) to compile GPU kernels.",
        "Install ptxas matching TensorFlow's CUDA version (`pip install "
        "nvidia-cuda-nvcc-cu12==<version>` in the TF environment, or cuda-nvcc-12-<minor>) "
        "and put it on PATH, or set `XLA_FLAGS=--xla_gpu_cuda_data_dir=<cuda dir>`.",
    ),
    "ptxas-fallback-to-driver": (
        "warning",
        "XLA found no ptxas and falls back to the driver's PTX JIT, which is slower and "
        "fails when the driver is older than the CUDA toolkit.",
        "Install nvidia-cuda-nvcc-cu12 (matching TF's CUDA version) in the TF environment "
        "so XLA uses ptxas.",
    ),
    "tf-trt-not-found": (
        "info",
        "TensorRT is not installed; only TF-TRT needs it.",
        "Nothing to do unless you use TF-TRT; then install the tensorrt package that matches "
        "TensorFlow's CUDA version.",
    ),
    "numa-node-negative": (
        "info",
        "The kernel reports no NUMA node for the GPU (-1); TensorFlow assumes node 0. "
        "Harmless on single-socket hosts and VMs.",
        "Nothing to do; to silence it, write the right node to "
        "/sys/bus/pci/devices/<bus id>/numa_node at boot.",
    ),
    "tf-gpu-device-created": (
        "info",
        "TensorFlow created a GPU device: the driver, CUDA and cuDNN stack loaded.",
        "Nothing to do.",
    ),
}

# Each pattern is a sequence of fragments joined by ``.*`` ("this, then later on the line
# that"). A fragment never holds an unbounded repeat (``*``, ``+``, ``{n,}``): each fragment is
# searched once, from where the previous one ended, so a line costs time linear in its length.
# A single regex ``A.*B.*C`` backtracks quadratically: a 1 MiB line took minutes (issue 10).
GAP = ".*"


def compile_signature(pattern: str) -> tuple[re.Pattern[str], ...]:
    """The fragments of `pattern` (split at ``.*``), each compiled case-insensitively."""
    return tuple(re.compile(part, re.IGNORECASE) for part in pattern.split(GAP) if part)


_META = set(".^$*+?{}[]()|\\")


def leading_literal(pattern: str) -> str:
    """The plain text a pattern starts with (escaped punctuation counts as text), lowercased:
    a line without it cannot match, and `in` finds it far faster than a case-blind regex."""
    text = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern) and not pattern[index + 1].isalnum():
            text.append(pattern[index + 1])
            index += 2
            continue
        if char in _META:
            break
        text.append(char)
        index += 1
    if index < len(pattern) and pattern[index] in "*+?{":
        text = text[:-1]  # the last character is optional or repeated
    return "".join(text).lower()


def signature_matches(
    fragments: tuple[re.Pattern[str], ...], line: str, lowered: str | None = None
) -> bool:
    """True when every fragment is found on `line`, each after the end of the one before.
    `lowered` is ``line.lower()``, for the quick check of the first fragment's text."""
    if lowered is not None and fragments:
        literal = _LITERALS.get(fragments[0].pattern) or leading_literal(fragments[0].pattern)
        if literal not in lowered:
            return False
    position = 0
    for fragment in fragments:
        found = fragment.search(line, position)
        if found is None:
            return False
        position = found.end()
    return True


# code -> patterns; a line matching any pattern is evidence for the code.
SIGNATURE_PATTERNS: dict[str, tuple[str, ...]] = {
    "nvml-driver-library-mismatch": (
        r"Failed to initialize NVML: Driver/library version mismatch",
    ),
    "nvidia-smi-no-driver": (
        r"NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver",
    ),
    "nvidia-smi-no-nvml-library": (r"NVIDIA-SMI couldn.t find libnvidia-ml\.so",),
    "secure-boot-key-rejected": (
        r"Key was rejected by service",
        r"Loading of module with unavailable key is rejected",
    ),
    "dkms-build-failed": (r"Bad return status for module build on kernel",),
    "nouveau-owns-gpu": (
        r"NVRM: The NVIDIA probe routine was not called for",
        r"NVRM: .*nouveau.* was loaded and obtained ownership",
    ),
    "gpu-unsupported-by-driver": (
        r"NVRM: The NVIDIA GPU \S{1,64} \(PCI ID: [0-9a-f:]{1,32}\).*not supported by the",
    ),
    "apt-held-broken-packages": (
        r"you have held broken packages",
        r"generated breaks, this may be caused by held packages",
    ),
    "tf-cuda-driver-not-found": (
        r"Could not find cuda drivers on your machine",
        r"Could not load dynamic library 'libcuda\.so",
        r"failed call to cuInit",
        r"kernel driver does not appear to be running on this host",
    ),
    "tf-cannot-dlopen": (r"Cannot dlopen some GPU libraries",),
    "cudnn-version-mismatch": (
        r"Loaded runtime CuDNN library: \S{1,64} but source was compiled with",
    ),
    "xla-libdevice-not-found": (
        r"libdevice not found at",
        r"libdevice is required by this HLO module but was not found",
    ),
    "xla-libdevice-dir-missing": (r"Can't find libdevice directory",),
    "ptxas-not-found": (
        r"ptxas not found",
        r"Couldn't find ptxas",
        r"Couldn't get ptxas version",
        r"No PTX compilation provider is available",
        r"Failed to launch ptxas",
    ),
    "ptxas-fallback-to-driver": (r"Can't find ptxas binary",),
    "tf-trt-not-found": (
        r"TF-TRT Warning: Could not find TensorRT",
        r"Cannot dlopen some TensorRT libraries",
    ),
    "numa-node-negative": (r"NUMA node read from SysFS had negative value",),
    "tf-gpu-device-created": (
        r"Created (?:TensorFlow )?device \(?/job:[^ ]{1,200}/device:GPU:\d{1,4} with "
        r"\d{1,9} MB memory",
    ),
}
DIAGNOSIS_CODES.update(DEPLOY_CODES)
SIGNATURE_PATTERNS.update(DEPLOY_PATTERNS)
# DCGM's own errors, those a captured run holds (the parser knows a few more from DCGM's source).
for _error in DCGM_ERRORS:
    if _error.recorded:
        DIAGNOSIS_CODES[_error.code] = ("error", _error.message, _error.fix)
        SIGNATURE_PATTERNS[_error.code] = _error.patterns
_SIGNATURES: dict[str, tuple[tuple[re.Pattern[str], ...], ...]] = {
    code: tuple(compile_signature(pattern) for pattern in patterns)
    for code, patterns in SIGNATURE_PATTERNS.items()
}
_LITERALS = {
    fragments[0].pattern: leading_literal(fragments[0].pattern)
    for patterns in _SIGNATURES.values()
    for fragments in patterns
}


@dataclass(frozen=True)
class Finding:
    """A recognised signature: what it means, how to fix it, and where it was seen."""

    code: str
    severity: str  # "error" | "warning" | "info"
    message: str
    fix: str
    line: str  # the first matching line, stripped
    line_number: int  # 1-based
    count: int  # how many lines matched

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def diagnose(text: str) -> list[Finding]:
    """Known failure signatures in a pasted log or command output, errors first.

    One finding per code, pointing at the first line that matched; a healthy TensorFlow
    log gives only "info" findings.

    >>> [f.code for f in diagnose("Failed to initialize NVML: Driver/library version mismatch")]
    ['nvml-driver-library-mismatch']
    """
    first: dict[str, tuple[int, str]] = {}
    counts: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        lowered = raw.lower()
        for code, patterns in _SIGNATURES.items():
            if any(signature_matches(fragments, raw, lowered) for fragments in patterns):
                counts[code] = counts.get(code, 0) + 1
                first.setdefault(code, (number, raw.strip()))

    findings = []
    for code, (number, line) in first.items():
        severity, message, fix = DIAGNOSIS_CODES[code]
        findings.append(
            Finding(
                code=code,
                severity=severity,
                message=message,
                fix=fix,
                line=line,
                line_number=number,
                count=counts[code],
            )
        )
    findings.sort(key=lambda finding: (SEVERITIES.index(finding.severity), finding.line_number))
    return findings


def codes_markdown() -> str:
    """``DIAGNOSIS_CODES`` as a Markdown table, for docs/reference/diagnose-codes.md."""
    lines = ["| code | severity | meaning | fix |", "| --- | --- | --- | --- |"]
    for code, (severity, message, fix) in DIAGNOSIS_CODES.items():
        cells = (f"`{code}`", severity, message, fix)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
