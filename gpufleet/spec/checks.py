"""Checks of single inventory values: their types, ranges and formats."""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Union
from urllib.parse import urlsplit


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
    "nccl_tests_url",
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
        bad = [a for a, s in value.items() if not re.fullmatch(r"[0-9a-f]{64}", s)]
        if bad:
            return [
                f"miniforge_sha256 for {', '.join(bad)} is not a lower-case sha256. Fix: "
                "copy it from the release's .sha256 file."
            ]
    return []
