"""Operation names of a `--dry --json` plan turned into sentences a person reads as drift.

A plan names operations, not findings: "gpufleet cuda_stack | libnccl2 held" is listed for a
host when that operation would change something there, i.e. libnccl2 is not held.
Each rule below says, for one operation name, what the host must look like for it to change.
Rules match the last ``|`` segment of the name (the operation inside its stage); a name that
no rule matches is reported as it is, so a new operation never hides.

Example: ``sentence_for("gpufleet cuda_stack | libnccl2 held")`` -> ``"libnccl2 no longer held"``
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpufleet.stages import foreign
from gpufleet.stages.driver import DKMS_MOK, UNATTENDED_UPGRADES
from gpufleet.stages.host_config import (
    DISTRO_DRIVER_BLOCK,
    DRIVER_PREFERENCES,
    NOUVEAU_BLACKLIST,
    SOURCES,
)
from gpufleet.stages.host_probe import DRIVER_MARKER
from gpufleet.stages.nvidia_repo import APT_PROXY, SIGNED_OPERATION


@dataclass(frozen=True)
class Rule:
    """``pattern`` (full match on the operation) -> ``sentence`` (``str.format`` of its groups)."""

    pattern: re.Pattern[str]
    sentence: str


def _rule(pattern: str, sentence: str) -> Rule:
    return Rule(re.compile(pattern), sentence)


# One rule per operation of deploy/gpu_node.py (gpufleet/stages/*.py), in deploy order, then
# pyinfra's own operations when a deploy leaves them unnamed ("files.file (path=/x)"). File
# operations are named "PATH: what it holds"; package holds "PACKAGE held".
RULES: tuple[Rule, ...] = (
    # run_start (its deploy lock is taken only while a deploy executes: never in a plan)
    _rule(
        r"dpkg repaired.*",
        "dpkg was interrupted (dpkg --audit reports unfinished packages; apt refuses to "
        "install until the next deploy repairs it)",
    ),
    _rule(r"deploy lock (taken|released).*", "the deploy lock would change (not a host state)"),
    # nvidia_repo
    _rule(
        rf"{re.escape(APT_PROXY)}: no apt proxy",
        f"{APT_PROXY} exists though no apt proxy is declared",
    ),
    _rule(rf"{re.escape(APT_PROXY)}: apt proxy", f"apt proxy setting in {APT_PROXY} differs"),
    _rule(r"ca-certificates, curl, gnupg", "ca-certificates, curl or gnupg missing"),
    _rule(
        rf"(?P<path>/\S+): {re.escape(foreign.REPAIRS['apt-source'])}",
        "{path} adds NVIDIA's repository beside gpufleet's source (the deploy removes it)",
    ),
    _rule(
        r"no cuda-keyring one-line source",
        "cuda-keyring's one-line apt source is present (apt refuses it beside the managed one)",
    ),
    _rule(
        re.escape(SIGNED_OPERATION),
        "the NVIDIA CUDA repository is signed by another key than nvidia_repo_key_fingerprint "
        "(apt keeps old package lists; a deploy names both keys)",
    ),
    _rule(
        r"NVIDIA CUDA repository.*",
        f"NVIDIA CUDA repository key or {SOURCES} differs",
    ),
    # driver
    _rule(r"kernel headers and DKMS", "kernel headers for the running kernel or DKMS missing"),
    _rule(
        rf"(?P<path>/\S+): {re.escape(foreign.REPAIRS['nouveau'])}",
        "{path} loads nouveau (the deploy comments the line out)",
    ),
    _rule(
        rf"(?P<path>/\S+): {re.escape(foreign.REPAIRS['apt-pin'])}",
        "{path} pins NVIDIA packages beside gpufleet's branch lock (the deploy removes it)",
    ),
    _rule(rf"{re.escape(DKMS_MOK)}: DKMS signs .*", f"{DKMS_MOK} differs (DKMS module signing)"),
    _rule(
        rf"{re.escape(NOUVEAU_BLACKLIST)}: nouveau .*",
        f"{NOUVEAU_BLACKLIST} differs (nouveau not blacklisted)",
    ),
    _rule(
        rf"{re.escape(DISTRO_DRIVER_BLOCK)}: distro builds .*",
        f"{DISTRO_DRIVER_BLOCK} missing or differs (the distribution's NVIDIA driver builds "
        "are not blocked)",
    ),
    _rule(r"uninstall the runfile driver", "a runfile-installed NVIDIA driver is present"),
    _rule(
        r"remove the previous driver.*",
        "NVIDIA driver packages of another branch (or a foreign driver) are installed",
    ),
    _rule(
        rf"{re.escape(DRIVER_PREFERENCES)}: absent .*",
        f"{DRIVER_PREFERENCES} exists though NVIDIA's pinning package locks the branch",
    ),
    _rule(r"lock the branch: NVIDIA's pinning package", "driver pinning package not installed"),
    _rule(
        rf"{re.escape(DRIVER_PREFERENCES)}: driver branch locked .*",
        f"{DRIVER_PREFERENCES} differs (driver branch lock)",
    ),
    _rule(
        r"NVIDIA driver packages of the locked branch",
        "NVIDIA driver packages missing or at another version",
    ),
    _rule(
        r"NVIDIA (?P<branch>\d+) module built for the running kernel (?P<kernel>\S+) \(DKMS\)",
        "the running kernel {kernel} has no NVIDIA {branch} module (DKMS did not build it): the "
        "deploy rebuilds it",
    ),
    _rule(
        r"Fabric Manager at the driver's exact version",
        "Fabric Manager is not at the driver's exact version",
    ),
    _rule(r"(?P<package>[a-z0-9][a-z0-9+.-]+) held", "{package} no longer held"),
    _rule(
        rf"{re.escape(DRIVER_MARKER)}: driver branch recorded",
        f"{DRIVER_MARKER} differs (recorded driver branch)",
    ),
    _rule(
        rf"{re.escape(UNATTENDED_UPGRADES)}: unattended-upgrades .*",
        f"{UNATTENDED_UPGRADES} differs (unattended-upgrades may upgrade NVIDIA packages)",
    ),
    _rule(
        r"reboot if the running driver is not the installed one.*",
        "the running driver is not the installed one (reboot pending)",
    ),
    # services (driver's and monitoring's): enabled, and running/started, apart
    _rule(r"(?P<unit>\S+) enabled( \(.*\))?", "{unit} not enabled"),
    _rule(r"(?P<unit>\S+) running( \(.*\))?", "{unit} not running"),
    _rule(r"(?P<unit>\S+) started", "{unit} not started"),
    # cuda_stack
    _rule(r"system CUDA toolkit", "system CUDA toolkit missing or at another version"),
    _rule(r"cuDNN runtime and dev, pinned", "cuDNN packages missing or at another version"),
    _rule(r"NCCL runtime and dev, pinned", "NCCL packages missing or at another version"),
    # dcgm
    _rule(
        r"DCGM \(datacenter-gpu-manager-4\), pinned",
        "DCGM packages missing or at another version",
    ),
    # python_env
    _rule(r"(?P<path>/\S+) for the installer", "{path} missing"),
    _rule(r"Miniforge installer \(sha256 checked\)", "Miniforge installer missing or differs"),
    _rule(r"Miniforge", "Miniforge not installed"),
    _rule(r"conda environment", "conda environment missing"),
    _rule(r"system Python with venv", "system Python or its venv module missing"),
    _rule(r"tool venv for uv", "tool venv for uv missing"),
    _rule(r"uv in the tool venv", "uv missing from the tool venv"),
    _rule(r"virtual environment", "Python virtual environment missing"),
    _rule(r"(?P<path>/\S+): CUDA wheel settings.*", "{path} differs (CUDA wheel settings)"),
    _rule(r"(?P<path>/\S+): conda activate\.d .*", "{path} differs (conda activate.d hook)"),
    _rule(r"(?P<path>/\S+): gpufleet-python wrapper", "{path} differs (Python wrapper)"),
    _rule(r"(?P<path>/\S+): pip constraints .*", "{path} differs (pip constraints)"),
    _rule(
        r"pip install TensorFlow.*",
        "TensorFlow, nvidia-ml-py or a pinned nvidia-* wheel not installed as declared, or "
        "its installed files missing or damaged",
    ),
    # validation_payload
    _rule(r"validation suite, versioned.*", "validation payload missing or differs"),
    # monitoring (periodic checks)
    _rule(
        r"(?P<path>/\S+): expectations for the periodic checks",
        "{path} differs (what the periodic checks expect)",
    ),
    _rule(r"(?P<unit>\S+) \(textfile collector\)", "{unit} not installed"),
    _rule(
        r"(?P<path>/\S+): (?P<unit>\S+) reads textfiles from (?P<dir>\S+)",
        "{path} differs ({unit} does not read textfiles from {dir})",
    ),
    _rule(
        r"(?P<service>/\S+), (?P<timer>\S+): periodic checks' units",
        "{service} or {timer} missing or differs (periodic checks)",
    ),
    _rule(
        rf"(?P<paths>/.+): {re.escape(foreign.REPAIRS['unit'])}",
        "{paths}: foreign override of gpufleet's periodic units (the deploy removes it)",
    ),
    # pyinfra's operations left unnamed: "module.op (arg=value, ...)"
    _rule(
        r"files\.(file|put|template) \((?:path|dest)=(?P<path>[^,)]+).*",
        "{path} missing or differs",
    ),
    _rule(r"files\.(line|replace|block) \(path=(?P<path>[^,)]+).*", "{path} differs"),
    _rule(r"files\.directory \(path=(?P<path>[^,)]+).*", "directory {path} missing or differs"),
    _rule(r"files\.link \(path=(?P<path>[^,)]+).*", "link {path} missing or differs"),
    _rule(
        r"(?:systemd|server)\.service \((?:service=)?(?P<unit>[^,)]+).*",
        "{unit} not in the declared state",
    ),
    _rule(r"(?:apt|server)\.packages \(packages=(?P<packages>.+)\)", "packages {packages} differ"),
    # any other file operation named "PATH: what"
    _rule(r"(?P<path>/\S+): (?P<what>.+)", "{path} missing or differs ({what})"),
)

# The deploy names operations "deploy name | operation name" (nested deploys add segments).
_SEPARATOR = " | "


def operation_part(name: str) -> str:
    """The operation's own name without its deploy prefix: ``"gpufleet driver | x"`` -> ``"x"``."""
    return name.rsplit(_SEPARATOR, 1)[-1].strip()


def sentence_for(name: str, rules: tuple[Rule, ...] = RULES) -> str:
    """What a pending change of operation ``name`` means for the host, or the name itself.

    Example: ``sentence_for("files.file (path=/etc/x)") == "/etc/x differs"``
    """
    part = operation_part(name)
    for rule in rules:
        found = rule.pattern.fullmatch(part)
        if found:
            groups = {key: value for key, value in found.groupdict().items() if value is not None}
            return rule.sentence.format(**groups)
    return f"would change: {name}"


def conditional_sentence(name: str) -> str:
    """An operation behind ``_if``: its outcome is only known when the run gets there."""
    return f"{operation_part(name)}: may differ (checked at run time)"
