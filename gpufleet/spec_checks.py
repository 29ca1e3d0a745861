"""Checks behind NodeSpec: value types, single values, and combinations of values."""

from __future__ import annotations

import re
import types
import typing
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import urlsplit

from gpufleet import matrix
from gpufleet.drivers import version_tuple

if TYPE_CHECKING:
    from gpufleet.spec import NodeSpec


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
_URL_SCHEMES = ("http", "https", "file")
_PATH_KEYS = ("env_prefix", "payload_dir", "results_dir", "textfile_dir")
_URL_KEYS = (
    "nvidia_repo_url",
    "nvidia_repo_key_url",
    "apt_proxy",
    "pip_index_url",
    "miniforge_url",
)


def value_errors(key: str, value: Any, shown: str) -> list[str]:
    """Checks of one value on its own (ranges, formats); combinations come later."""
    if value is None:
        return []
    if key in _PATH_KEYS and not value.startswith("/"):
        return [f"{key} = {value!r} is not an absolute path. Fix: start it with '/'."]
    if key in _URL_KEYS and urlsplit(value).scheme not in _URL_SCHEMES:
        return [
            f"{key} = {shown} is not an http(s):// or file:// URL. Fix: give the "
            "full URL, e.g. http://proxy.example:3128."
        ]
    if key in ("python_version", "cuda_version") and not _VERSION.match(value):
        return [f"{key} = {value!r} is not a version like '3.11'. Fix: quote it as a string."]
    if key in ("reboot_timeout_s", "min_free_disk_gib", "gpu_count") and value < 0:
        return [f"{key} = {value!r} is negative. Fix: use 0 or more."]
    if key == "reboot_timeout_s" and value == 0:
        return ["reboot_timeout_s = 0 leaves no time for the host to come back. Fix: e.g. 600."]
    if key == "nvidia_repo_key_fingerprint" and not re.fullmatch(r"[0-9A-Fa-f]{40}", value):
        return [
            f"nvidia_repo_key_fingerprint = {value!r} is not a 40-hex-digit fingerprint. Fix: "
            "copy it from `gpg --show-keys KEYFILE`, without spaces."
        ]
    if key == "miniforge_sha256":
        bad = [a for a, s in value.items() if not re.fullmatch(r"[0-9a-f]{64}", s)]
        if bad:
            return [
                f"miniforge_sha256 for {', '.join(bad)} is not a lower-case sha256. Fix: "
                "copy it from the release's .sha256 file."
            ]
    return []


def combination_errors(spec: NodeSpec) -> list[str]:
    errors = []
    if spec.secure_boot_plan == "mok" and not (spec.mok_key_path and spec.mok_cert_path):
        errors.append(
            "secure_boot_plan = 'mok' needs mok_key_path and mok_cert_path. Fix: set both, or "
            "use secure_boot_plan = 'ubuntu-signed' on Ubuntu."
        )
    if spec.gpu_less and spec.gpu_count:
        errors.append(
            f"gpu_less = True contradicts gpu_count = {spec.gpu_count}. Fix: drop one of them."
        )
    if spec.use_uv and spec.python_env != "venv":
        errors.append("use_uv = True needs python_env = 'venv'. Fix: set python_env = 'venv'.")
    if spec.require_cuda_build and spec.tensorflow_package.split("[")[0] == "tensorflow-cpu":
        errors.append(
            "tensorflow_package = 'tensorflow-cpu' has no CUDA build but require_cuda_build is "
            "True. Fix: set require_cuda_build = False (CPU-only / sandbox hosts)."
        )
    release = matrix.TF_RELEASES.get(spec.tf_version)
    if release is None:
        errors.append(f"tf_version: {matrix.unknown_tf_message(spec.tf_version)}")
    elif spec.python_env == "conda" or spec.use_uv:
        lo, hi = (version_tuple(v) for v in (release.python_min, release.python_max))
        if not lo <= version_tuple(spec.python_version)[:2] <= hi:
            errors.append(
                f"python_version = {spec.python_version!r} is outside TensorFlow "
                f"{spec.tf_version}'s range {release.python_min}..{release.python_max}. Fix: "
                f"set python_version to e.g. {release.python_max}."
            )
    if spec.driver_branch is not None and spec.driver_branch not in matrix.DRIVER_BRANCHES:
        errors.append(
            f"driver_branch = {spec.driver_branch} is not a known branch ("
            f"{', '.join(map(str, matrix.DRIVER_BRANCHES))}). Fix: pick one, or leave it unset."
        )
    if spec.cuda_version is not None and spec.cuda_version not in matrix.CUDA_MIN_DRIVER:
        errors.append(
            f"cuda_version = {spec.cuda_version!r} is not known ("
            f"{', '.join(matrix.CUDA_MIN_DRIVER)}). Fix: pick one, or leave it unset."
        )
    return errors
