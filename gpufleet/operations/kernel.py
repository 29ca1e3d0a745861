"""Kernel module blacklists (initramfs rebuilt on change) and reboots when the driver needs one."""

from __future__ import annotations

import hashlib
import posixpath

from pyinfra import host, logger
from pyinfra.api import OperationError, QuoteString, StringCommand, operation
from pyinfra.operations import server

from gpufleet.operations.probes import FileDigest, NvidiaModuleState
from gpufleet.text import plain

REBOOT_POLICIES = ("auto", "never", "always")


def blacklist_text(module: str) -> str:
    """The modprobe.d content that keeps ``module`` from loading, at boot and on demand."""
    return (
        f"# gpufleet: keep {module} away from NVIDIA GPUs (the NVIDIA driver needs them)\n"
        f"blacklist {module}\n"
        f"options {module} modeset=0\n"
    )


@operation()
def blacklist_module(module: str, path: str):
    """
    Blacklist a kernel module in ``/etc/modprobe.d`` and, only when that file changed, rebuild
    the initramfs so the module stays out at boot too (skipped where no update-initramfs exists,
    as in containers).

    + module: e.g. ``"nouveau"``
    + path: e.g. ``"/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"``

    **Example:**

    .. code:: python

        blacklist_module(module="nouveau", path="/etc/modprobe.d/gpufleet-nouveau.conf")
    """
    text = blacklist_text(module)
    current = host.get_fact(FileDigest, path=path)
    if current is not None and current["sha256"] == hashlib.sha256(text.encode()).hexdigest():
        host.noop(f"{module} is already blacklisted in {path}")
        return
    yield StringCommand(
        "mkdir -p",
        QuoteString(posixpath.dirname(path)),
        "&& printf '%s'",
        QuoteString(text),
        ">",
        QuoteString(path),
        "&& chmod 644",
        QuoteString(path),
    )
    yield (
        "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u; "
        "else echo 'no update-initramfs on this host: initramfs left as is'; fi"
    )


def reboot_reason(module_state: dict) -> str | None:
    """Why the running kernel cannot use the installed driver yet, or None."""
    if module_state.get("nouveau"):
        return "nouveau is loaded"
    loaded, installed = module_state.get("loaded"), module_state.get("installed")
    if loaded and installed and loaded != installed:
        return f"NVIDIA module {loaded} is loaded, {installed} is installed"
    return None


@operation(is_idempotent=False)
def reboot_for_driver(policy: str = "auto", reboot_timeout: int = 600, delay: int = 10):
    """
    Reboot per policy so the installed NVIDIA driver is the one running. Decided when the
    operation runs, from the module state at that moment.

    + policy: ``auto`` reboots only when nouveau is loaded or the loaded NVIDIA module's version
      differs from the installed one; ``never`` only reports a pending reboot; ``always`` reboots
    + reboot_timeout: seconds to wait for the host to come back
    + delay: seconds before the first reconnection attempt

    **Example:**

    .. code:: python

        reboot_for_driver(policy="auto", reboot_timeout=900)
    """
    if policy not in REBOOT_POLICIES:
        raise OperationError(f"reboot_for_driver: policy {policy!r} not in {REBOOT_POLICIES}")
    if policy == "always":
        reason: str | None = "reboot policy is 'always'"
    else:
        reason = reboot_reason(host.get_fact(NvidiaModuleState))
        reason = None if reason is None else plain(reason)  # quotes the host: no escapes
    if reason is None:
        host.noop("the running driver is the installed one: no reboot needed")
        return
    if policy == "never":
        logger.warning(
            f"{host.print_prefix}reboot pending: {reason} (reboot policy 'never'; reboot this "
            "host yourself, or run again with reboot: 'auto')"
        )
        host.noop(f"reboot pending ({reason}), left to the operator by policy 'never'")
        return
    logger.info(f"{host.print_prefix}reboot needed: {reason}")
    yield from server.reboot._inner(delay=delay, reboot_timeout=reboot_timeout)
