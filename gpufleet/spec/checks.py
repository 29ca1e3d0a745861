"""Checks of single inventory values: their types, ranges and formats."""

from __future__ import annotations

import math
import posixpath
import re
import types
import typing
from typing import Any, Union

from gpufleet.spec.urls import URL_KEYS, url_errors


def type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(hint))
    if origin is dict:
        return "a mapping"
    return {str: "a string", int: "an integer", bool: "true/false", type(None): "unset (None)"}.get(
        hint, str(hint)
    )


def type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(type_ok(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is dict:
        key_type, value_type = typing.get_args(hint)
        return isinstance(value, dict) and all(
            type_ok(k, key_type) and type_ok(v, value_type) for k, v in value.items()
        )
    if hint is Any:
        return True
    if hint is int:  # bool is an int in Python; `gpu_count: true` is a mistake, not 1
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_PATH_KEYS = (
    "env_prefix",
    "payload_dir",
    "results_dir",
    "textfile_dir",
    "mok_key_path",
    "mok_cert_path",
    "slurm_spool_dir",
)
# Directories gpufleet writes into or deletes in (as root): never a system directory itself,
# nor anything below those that hold the system, the kernel's views or temp files.
_OWN_DIR_KEYS = ("env_prefix", "payload_dir", "results_dir", "textfile_dir", "slurm_spool_dir")
_SYSTEM_DIRS = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/include",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local",
        "/usr/local/bin",
        "/usr/local/lib",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/cache",
        "/var/lib",
        "/var/log",
        "/var/tmp",
        "/var/lib/prometheus",
    ]
)
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/", "/run/", "/tmp/", "/var/tmp/", "/boot/", "/etc/")
_PATH = re.compile(r"/[A-Za-z0-9_.+/-]{0,200}")
_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# PEP 508 name (PEP 503 letters) with optional extras: tensorflow[and-cuda], tensorflow-cpu.
_PIP_NAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?"
)
# Debian policy 5.6.1: lower case letters, digits, + - . ; two or more, starting alnum.
_DEB_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_HOST_PORT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})?")
# A Debian/Ubuntu interpreter package and command: python3, python3.9, python3.12.
_INTERPRETER = re.compile(r"python3(?:\.[0-9]{1,2})?")
_MINIFORGE_VERSION = re.compile(r"[0-9][0-9A-Za-z.]{0,30}(?:-[0-9A-Za-z.]{1,30}){0,3}")
MINIFORGE_ARCHES = ("x86_64", "aarch64", "ppc64le")
# systemd.time(7) calendar expressions and shorthands: words, digits, * , . : / ~ - and spaces.
_CALENDAR = re.compile(r"[A-Za-z0-9*,.:/~ -]{1,100}")
# Its words (systemd.time(7)): a shorthand alone, weekdays first, a time zone last; the rest
# (at most a date and a time) digits, * and - : , . / ~.
_SHORTHAND = re.compile(r"(minute|hour|dai|week|month|quarter|semiannual|year|annual)ly", re.I)
_WEEKDAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*"
_WEEKDAYS = re.compile(rf"{_WEEKDAY}(?:(?:,|\.\.){_WEEKDAY})*", re.IGNORECASE)
_DATE_TIME = re.compile(r"(?=.*[0-9*])[0-9*,./~:-]+")
_ZONE = re.compile(r"UTC|GMT|[A-Z][A-Za-z_+-]*(?:/[A-Za-z0-9_+-]+)+")


def calendar_ok(value: str) -> bool:
    """Whether ``value`` has the shape of an OnCalendar= expression ("every day" has not); not
    systemd's parser: ``systemd-analyze calendar`` on the host has the last word."""
    if not _CALENDAR.fullmatch(value.strip() or "!"):
        return False
    first, *rest = value.split()
    if rest and _ZONE.fullmatch(rest[-1]):
        rest = rest[:-1]
    if _SHORTHAND.fullmatch(first):
        return not rest
    words = rest if _WEEKDAYS.fullmatch(first) else [first, *rest]
    return len(words) <= 2 and all(_DATE_TIME.fullmatch(word) for word in words)


_MAXIMA = {
    "reboot_timeout_s": 86400,
    "min_free_disk_gib": 100_000,
    "gpu_count": 1024,
    "interconnect_gbps": 3200,  # 8x 400G NICs, the most a host declares today
    "nccl_fabric_gbps": 3200,
    "slurm_health_interval": 86400,
    "apt_timeout_s": 3600,
}
# A host name or IPv4/IPv6 address, nothing a shell or TF_CONFIG gives meaning to.
_ADDRESS = re.compile(r"(?![-.])[A-Za-z0-9._-]{1,253}|[0-9A-Fa-f:.]{2,45}")
# A DNS name (RFC 1123 labels) or a dotted IPv4 address: it reaches scontrol's command line.
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# sbatch --constraint: feature names joined by & or |, nothing a shell gives meaning to.
_SLURM_CONSTRAINT = re.compile(r"[A-Za-z0-9_.-]{1,64}(?:[&|][A-Za-z0-9_.-]{1,64}){0,15}")
# NCCL's own syntax (NCCL env docs): an optional ^ (exclude) and = (exact match), then a comma
# list of interface names, or of HCA names with an optional :port. They reach mpirun's command
# line (quoted), so nothing else is let through.
_NCCL_IFNAME = re.compile(r"\^?=?[A-Za-z0-9_.@-]{1,15}(?:,[A-Za-z0-9_.@-]{1,15}){0,31}")
_NCCL_HCA = re.compile(
    r"\^?=?[A-Za-z0-9_.-]{1,32}(?::[0-9]{1,2})?(?:,[A-Za-z0-9_.-]{1,32}(?::[0-9]{1,2})?){0,31}"
)
_HOST_NAME = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*"
)


def path_errors(key: str, value: str) -> list[str]:
    """An absolute, normalised path of plain characters; for gpufleet's own directories, not a
    system directory."""
    if not value.startswith("/"):
        return [f"{key} = {value!r} is not an absolute path. Fix: start it with '/'."]
    if not _PATH.fullmatch(value) or posixpath.normpath(value) != value or "/../" in value + "/":
        return [
            f"{key} = {value!r} is not a plain absolute path. Fix: use letters, digits and "
            "_ . + - between single slashes, with no '..' and no trailing slash, e.g. "
            "/opt/gpufleet."
        ]
    if key in _OWN_DIR_KEYS and (value in _SYSTEM_DIRS or value.startswith(_SYSTEM_TREES)):
        return [
            f"{key} = {value!r} is a system directory (or below one gpufleet must not write "
            f"in). Fix: give a directory of gpufleet's own, e.g. the default "
            f"{_DEFAULT_DIRS[key]!r}."
        ]
    return []


_DEFAULT_DIRS = {
    "env_prefix": "/opt/gpufleet",
    "payload_dir": "/opt/gpufleet/validation",
    "results_dir": "/var/lib/gpufleet/results",
    "textfile_dir": "/var/lib/prometheus/node-exporter",
    "slurm_spool_dir": "/var/lib/gpufleet/slurm-validate",
}


def _format_errors(key: str, value: Any) -> list[str]:
    """Grammars of the single-string keys (every one that reaches a shell, file or unit)."""
    if key == "env_name" and not _ENV_NAME.fullmatch(value):
        return [
            f"env_name = {value!r} is not a plain name. Fix: letters, digits, _ . - (starting "
            "with a letter or digit, at most 64), e.g. 'tf'."
        ]
    if key == "tensorflow_package" and not _PIP_NAME.fullmatch(value):
        return [
            f"tensorflow_package = {value!r} is not a package name with optional extras. Fix: "
            "e.g. 'tensorflow[and-cuda]' or 'tensorflow-cpu' (the version comes from tf_version)."
        ]
    if key == "kernel_headers_package" and value != "auto" and not _DEB_NAME.fullmatch(value):
        return [
            f"kernel_headers_package = {value!r} is not a Debian package name. Fix: 'auto' or "
            "e.g. 'linux-headers-generic'."
        ]
    if key == "pip_trusted_host" and not _HOST_PORT.fullmatch(value):
        return [
            f"pip_trusted_host = {value!r} is not a host name (with an optional :port). Fix: "
            "e.g. 'pypi-mirror.example.net'."
        ]
    if key == "python_interpreter" and not _INTERPRETER.fullmatch(value):
        return [
            f"python_interpreter = {value!r} is not a Python command of the OS's archive. Fix: "
            "'python3' or a versioned one such as 'python3.9' (no path: apt installs it)."
        ]
    if key == "slurm_controller" and (len(value) > 253 or not _HOST_NAME.fullmatch(value)):
        return [
            f"slurm_controller = {value!r} is not a host name or IPv4 address. Fix: e.g. "
            "'slurmctl01' or '10.0.0.5' (the SlurmctldHost of slurm.conf)."
        ]
    if key == "slurm_reservation" and not _SLURM_NAME.fullmatch(value):
        return [
            f"slurm_reservation = {value!r} is not a Slurm reservation name. Fix: letters, "
            "digits, _ . - (at most 64), e.g. 'gpu-maint' (scontrol show reservation)."
        ]
    if key == "slurm_constraint" and not _SLURM_CONSTRAINT.fullmatch(value):
        return [
            f"slurm_constraint = {value!r} is not a Slurm feature expression. Fix: feature "
            "names joined by & (and) or | (or), e.g. 'h100&ib' (sbatch --constraint)."
        ]
    if key == "slurm_partition" and not _SLURM_NAME.fullmatch(value):
        return [
            f"slurm_partition = {value!r} is not a Slurm partition name. Fix: letters, digits, "
            "_ . - (at most 64), e.g. 'gpu' (PartitionName= in slurm.conf)."
        ]
    if key == "nccl_socket_ifname" and not _NCCL_IFNAME.fullmatch(value):
        return [
            f"nccl_socket_ifname = {value!r} is not NCCL_SOCKET_IFNAME syntax. Fix: interface "
            "names or prefixes, comma-separated, optionally after ^ (exclude) or = (exact), e.g. "
            "'ens', '=eth0' or '^docker,lo'."
        ]
    if key == "nccl_ib_hca" and not _NCCL_HCA.fullmatch(value):
        return [
            f"nccl_ib_hca = {value!r} is not NCCL_IB_HCA syntax. Fix: HCA names with an optional "
            ":port, comma-separated, optionally after ^ or =, e.g. 'mlx5' or '=mlx5_0:1,mlx5_1:1'."
        ]
    if key == "miniforge_version" and not _MINIFORGE_VERSION.fullmatch(value):
        return [
            f"miniforge_version = {value!r} is not a release like '25.3.0-3'. Fix: a release "
            "name from github.com/conda-forge/miniforge/releases, or leave it unset (the pinned "
            "one)."
        ]
    if key == "periodic_schedule" and not calendar_ok(value):
        return [
            f"periodic_schedule = {value!r} is not a systemd calendar expression. Fix: e.g. "
            "'daily', 'hourly' or 'Mon..Fri *-*-* 03:00' (check it: systemd-analyze calendar)."
        ]
    return []


def value_errors(key: str, value: Any, shown: str) -> list[str]:
    """Checks of one value on its own (ranges, formats); combinations come later."""
    if value is None:
        return []
    if key in _PATH_KEYS:
        return path_errors(key, value)
    if key in URL_KEYS:
        return url_errors(key, value, shown)
    if key in ("python_version", "cuda_version") and not _VERSION.match(value):
        return [f"{key} = {value!r} is not a version like '3.11'. Fix: quote it as a string."]
    if key in _MAXIMA and value < 0:
        return [f"{key} = {value!r} is negative. Fix: use 0 or more."]
    if key in _MAXIMA and value > _MAXIMA[key]:
        return [f"{key} = {value!r} is more than {_MAXIMA[key]}. Fix: give a real figure."]
    if key in ("interconnect_gbps", "nccl_fabric_gbps") and value == 0:
        return [f"{key} = 0 declares no link. Fix: the NIC speed in Gbit/s, e.g. 100."]
    if key == "cluster_address" and not _ADDRESS.fullmatch(value):
        return [
            f"cluster_address = {value!r} is not a host name or IP address. Fix: e.g. "
            "'10.1.0.5' or 'gpu-a.ib.example.net' (letters, digits, '.', '-', '_', ':')."
        ]
    if key == "slurm_health_interval" and value < 10:
        return [
            f"slurm_health_interval = {value!r} is under 10 s: Slurm would run the health check "
            "back to back (0 turns it off). Fix: e.g. 300."
        ]
    if key == "apt_timeout_s" and value < 2:
        return [
            f"apt_timeout_s = {value!r} leaves apt no time to connect. Fix: seconds, 2 or "
            "more, e.g. 120 (tests use 5)."
        ]
    if key == "reboot_timeout_s" and value == 0:
        return ["reboot_timeout_s = 0 leaves no time for the host to come back. Fix: e.g. 600."]
    if key == "nvidia_repo_key_fingerprint" and not re.fullmatch(r"[0-9A-Fa-f]{40}", value):
        return [
            f"nvidia_repo_key_fingerprint = {value!r} is not a 40-hex-digit fingerprint. Fix: "
            "copy it from `gpg --show-keys KEYFILE`, without spaces."
        ]
    if key == "dcgm_diag_level" and value not in (1, 2, 3, 4):
        return [f"dcgm_diag_level = {value!r} is not 1, 2, 3 or 4. Fix: pick one, or unset it."]
    if key in ("nccl_tests_min_bytes", "nccl_tests_max_bytes") and not re.fullmatch(
        r"[1-9][0-9]*[KMG]?", value
    ):
        return [f"{key} = {value!r} is not a size like 8, 128M or 8G. Fix: digits, then K, M or G."]
    if key == "nccl_tests_sha256" and not re.fullmatch(r"[0-9a-f]{64}", value):
        return [
            f"nccl_tests_sha256 = {value!r} is not a lower-case sha256. Fix: give the 64 hex "
            "digits of `sha256sum` of the archive nccl_tests_url names."
        ]
    if key == "miniforge_sha256":
        return _sha256_errors(value)
    if key == "thresholds":
        return threshold_errors(value)
    if key == "calibration_file":
        return calibration_file_errors(value)
    if isinstance(value, str):
        return _format_errors(key, value)
    return []


_CALIBRATION_PATH = re.compile(r"[A-Za-z0-9_.+/-]{1,250}\.toml")


def calibration_file_errors(value: str) -> list[str]:
    """A path on the control node (absolute, or from where gpufleet runs) to a .toml file, of
    plain characters; its content is checked when `gpufleet validate` reads it."""
    parts = value.split("/")
    if not _CALIBRATION_PATH.fullmatch(value) or {"..", "."} & set(parts) or "" in parts[1:]:
        return [
            f"calibration_file = {value!r} is not a plain path to a .toml file. Fix: letters, "
            "digits and _ . + - between single slashes, no '..', ending in .toml, e.g. "
            "'calibration/nvidia-h100-80gb-hbm3-8x-nvswitch.toml' (what gpufleet validate "
            "--calibrate writes)."
        ]
    return []


def threshold_errors(value: dict[str, Any]) -> list[str]:
    """Threshold overrides the host's periodic run will accept: known names (the payload's
    thresholds.toml), finite numbers of 0 or more. Refused here, not daily on every host."""
    bad = [
        name
        for name, number in value.items()
        if isinstance(number, bool)
        or not isinstance(number, (int, float))
        or not math.isfinite(number)
        or number < 0
    ]
    if bad:
        return [
            f"thresholds {', '.join(map(repr, bad))} must be numbers of 0 or more. Fix: e.g. "
            "thresholds = {'xla_speedup_min': 1.2}."
        ]
    # The validation package ships with gpufleet (the payload); imported here only, as
    # validate/runner.py does, so the spec does not load it for every other key.
    from validation.verdicts.thresholds import ThresholdsError, load_thresholds

    try:
        load_thresholds(None, None, value)
    except ThresholdsError as exc:
        return [f"thresholds: {exc}"]
    return []


def _sha256_errors(value: dict[str, str]) -> list[str]:
    if not value:
        return [
            "miniforge_sha256 is empty, so no Miniforge installer could be checked. Fix: leave "
            "it unset (the pinned release's sums) or give one per architecture."
        ]
    unknown = sorted(set(value) - set(MINIFORGE_ARCHES))
    if unknown:
        return [
            f"miniforge_sha256 has entries for {', '.join(map(repr, unknown))}, which is no "
            f"`uname -m` Miniforge ships for. Fix: use {', '.join(MINIFORGE_ARCHES)}."
        ]
    bad = [a for a, s in value.items() if not re.fullmatch(r"[0-9a-f]{64}", s)]
    if bad:
        return [
            f"miniforge_sha256 for {', '.join(bad)} is not a lower-case sha256. Fix: "
            "copy it from the release's .sha256 file."
        ]
    return []
