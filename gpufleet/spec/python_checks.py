"""Checks of the Python environment keys together: conda or venv, uv, interpreter, TF range."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet import matrix
from gpufleet.matrix.drivers import version_tuple

if TYPE_CHECKING:
    from gpufleet.spec.model import NodeSpec


def python_env_errors(spec: NodeSpec) -> list[str]:
    """What contradicts itself among the Python environment keys (the OS's own interpreters
    are checked per host, in preflight: ``matrix.os_python``)."""
    errors: list[str] = []
    if spec.use_uv and spec.python_env != "venv":
        errors.append("use_uv = True needs python_env = 'venv'. Fix: set python_env = 'venv'.")
    if spec.python_interpreter is not None and spec.venv_interpreter is None:
        errors.append(
            f"python_interpreter = {spec.python_interpreter!r} only applies to python_env = "
            "'venv' without uv (conda and uv provide their own Python: python_version). Fix: "
            "unset python_interpreter, or set python_env = 'venv' and use_uv = False."
        )
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
    return errors
