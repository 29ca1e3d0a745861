"""The NVIDIA module built for the running kernel: ``dkms autoinstall``, or a clear failure."""

from __future__ import annotations

import re
import shlex

from pyinfra.api import OperationError, StringCommand, operation

# What `uname -r` prints: the probe's answer, so checked before it reaches a shell.
_KERNEL_RELEASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}")


def module_missing(installed_module: str | None, branch: int) -> bool:
    """Whether the running kernel lacks the branch's module (``modinfo``'s version, or None)."""
    return not (installed_module or "").startswith(f"{branch}.")


def rebuild_script(kernel_release: str, branch: int, load: bool = False) -> str:
    """The shell that builds the module for ``kernel_release`` and fails with ``dkms status``
    when none of the branch's version is there afterwards; ``load``: then ``modprobe`` it (no
    NVIDIA module is loaded, so the driver's services can start without a reboot)."""
    if not _KERNEL_RELEASE.fullmatch(kernel_release):
        raise OperationError(f"dkms: {kernel_release!r} is not a kernel release (uname -r)")
    release = shlex.quote(kernel_release)
    found = f"modinfo -k {release} -F version nvidia 2>/dev/null | grep -q '^{int(branch)}\\.'"
    return (
        f"if ! {found}; then dkms autoinstall -k {release}; fi; "
        f"if ! {found}; then "
        f"echo 'gpufleet: no NVIDIA {int(branch)} module for kernel '{release}' after "
        f"dkms autoinstall -k '{release}'. dkms status:' >&2; dkms status >&2; "
        f"echo 'Fix: read the build log that dkms status names, install the headers of "
        f"this kernel, or boot a kernel the branch builds against.' >&2; exit 1; fi"
        + ("; [ -e /sys/module/nvidia ] || modprobe nvidia" if load else "")
    )


@operation(is_idempotent=False)
def module_built(kernel_release: str, branch: int, load: bool = False):
    """
    Build the NVIDIA module of ``branch`` for ``kernel_release`` with DKMS (its packages are
    installed but the running kernel has no module: a kernel update whose build failed or was
    skipped). Fails, printing ``dkms status``, when the build leaves no module; ``load``:
    ``modprobe nvidia`` afterwards when no NVIDIA module is loaded.

    **Example:**

    .. code:: python

        module_built(kernel_release="5.15.0-92-generic", branch=580)
    """
    yield StringCommand(rebuild_script(kernel_release, branch, load))
