"""The Python interpreters each supported OS's own archive offers, and the venv check over them."""

from __future__ import annotations

from gpufleet.matrix.drivers import version_tuple
from gpufleet.matrix.tf_releases import TF_RELEASES, TFRelease

# OS -> {interpreter command -> its Python version}, from each release's own archive (main and
# universe, release and -updates pockets), read with `apt-cache policy` on 2026-12-01: focal's
# python3 is 3.8 (3.8.2-0ubuntu2) and focal-updates' universe has python3.9 and python3.9-venv
# (3.9.5-3ubuntu0~20.04.1); jammy's python3 is 3.10; noble's is 3.12 (3.12.3); bookworm's is
# 3.11. Left out on purpose: jammy's python3.11, a release candidate (3.11.0~rc1-1~22.04.1).
# A venv is built with `<interpreter> -m venv`, which needs `<interpreter>-venv`.
OS_PYTHONS: dict[tuple[str, str], dict[str, str]] = {
    ("ubuntu", "20.04"): {"python3": "3.8", "python3.9": "3.9"},
    ("ubuntu", "22.04"): {"python3": "3.10"},
    ("ubuntu", "24.04"): {"python3": "3.12"},
    ("debian", "12"): {"python3": "3.11"},
}
OS_NAMES = {"ubuntu": "Ubuntu", "debian": "Debian"}
# The pip a fresh venv gets where it predates PEP 600 (pip 20.3), whose manylinux_2_27/_2_28
# wheel tags numpy and ml-dtypes use: focal's venv module installs pip from python-pip-whl
# 20.0.2, which then finds no wheel for them (seen on the sandbox's focal host). Elsewhere the
# archive's pip is new enough: jammy 22.0.2, noble 24.0, bookworm 23.0.1.
OLD_VENV_PIP: dict[tuple[str, str], str] = {("ubuntu", "20.04"): "20.0.2"}
PEP600_PIP = "20.3"


def os_key(os_id: str, os_version: str) -> tuple[str, str]:
    """``("debian", "12.7") -> ("debian", "12")``; Ubuntu versions stay as they are."""
    os_id = os_id.strip().lower()
    version = os_version.strip()
    return (os_id, version.split(".", 1)[0]) if os_id == "debian" else (os_id, version)


def os_pythons(os_id: str, os_version: str) -> dict[str, str]:
    """The interpreters the OS's archive offers: ``os_pythons("ubuntu", "20.04")["python3.9"]``."""
    return dict(OS_PYTHONS.get(os_key(os_id, os_version), {}))


def fits(release: TFRelease, python: str) -> bool:
    """Whether TensorFlow ``release`` has wheels for Python ``python`` (``"3.9"``)."""
    wanted = version_tuple(python)[:2]
    return version_tuple(release.python_min) <= wanted <= version_tuple(release.python_max)


def newest_tf_for(python: str) -> str | None:
    """The newest TensorFlow release in the matrix with wheels for ``python``, else None.

    Example: ``newest_tf_for("3.9") == "2.20.0"`` (2.21 needs Python >= 3.10).
    """
    fitting = [r.version for r in TF_RELEASES.values() if fits(r, python)]
    return max(fitting, key=version_tuple) if fitting else None


def venv_python_conflict(
    release: TFRelease, os_id: str, os_version: str, interpreter: str
) -> str | None:
    """Why a venv on ``interpreter`` cannot run ``release`` on this OS, with the fix; else None.

    Example: TF 2.21.0 on Ubuntu 20.04 with ``python3`` (3.8) is refused, naming
    ``python_env: conda`` and ``tf_version <= 2.20.0 with python_interpreter: python3.9``.
    """
    offered = os_pythons(os_id, os_version)
    if not offered:
        return None  # an unsupported OS is refused on its own, with its own message
    os_name = f"{OS_NAMES.get(os_key(os_id, os_version)[0], os_id)} {os_version}"
    listing = ", ".join(f"{name} ({version})" for name, version in offered.items())
    version = offered.get(interpreter)
    if version is None:
        return (
            f"python_interpreter {interpreter!r} is not in {os_name}'s own archive, which offers "
            f"{listing}. Fix: set python_interpreter to one of those, or use python_env: conda."
        )
    if fits(release, version):
        return None
    if version_tuple(version) < version_tuple(release.python_min):
        need = f"TensorFlow {release.version} needs Python >= {release.python_min}"
    else:
        need = f"TensorFlow {release.version} supports Python up to {release.python_max}"
    fixes = [f"python_env: conda (python_version: '{release.python_max}')"]
    fixes += [f"python_interpreter: {name}" for name, v in offered.items() if fits(release, v)]
    for name, v in offered.items():
        newest = newest_tf_for(v)
        if newest is None or fits(release, v):
            continue
        older = version_tuple(newest) < version_tuple(release.version)
        wanted = f"tf_version <= {newest}" if older else f"tf_version: {newest}"
        fixes.append(f"{wanted} with python_interpreter: {name}")
    return (
        f"{need}; a venv on {os_name} would use {interpreter} ({version}). Fix: on {os_name} use "
        + ", or ".join(fixes)
        + "."
    )
