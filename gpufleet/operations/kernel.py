"""Kernel module blacklists (initramfs rebuilt on change) and reboots when the driver needs one."""

from __future__ import annotations

import hashlib
import posixpath
import time

from paramiko.ssh_exception import SSHException
from pyinfra import host, logger
from pyinfra.api import FunctionCommand, OperationError, QuoteString, StringCommand, operation
from pyinfra.api.host import Host
from pyinfra.api.state import State
from pyinfra.connectors.util import clear_askpass_cache, remove_any_sudo_askpass_file

from gpufleet.operations import connection
from gpufleet.operations.probes import NvidiaModuleState, file_digest, owner_differs
from gpufleet.text import plain

REBOOT_POLICIES = ("auto", "never", "always")

# The reboot wait's pauses, by name: a test replaces this, not time.sleep for the process.
_sleep = time.sleep


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
    current = file_digest(host, path)
    wanted = hashlib.sha256(text.encode()).hexdigest()
    if current is not None and current["sha256"] == wanted and not owner_differs(current):
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


def reboot_pending(reason: str) -> str:
    """What a host whose reboot policy is 'never' says while its driver waits for a reboot
    (``gpufleet drift`` counts the line as drift)."""
    return (
        f"reboot pending: {reason} (reboot policy 'never'; reboot this host yourself, or run "
        "again with reboot: 'auto')"
    )


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
        logger.warning(f"{host.print_prefix}{reboot_pending(reason)}")
        host.noop(f"reboot pending ({reason}), left to the operator by policy 'never'")
        return
    logger.info(f"{host.print_prefix}reboot needed: {reason}")
    boot_before: list[str] = []
    yield FunctionCommand(_before_reboot, (boot_before,), {})
    # Detached, so the channel closes at once instead of waiting on a dying sshd.
    yield StringCommand("( sleep 1 && reboot ) </dev/null >/dev/null 2>&1 &")
    yield FunctionCommand(_wait_for_reboot, (boot_before, delay, reboot_timeout), {})


BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def did_not_come_back(host_name: str, reboot_timeout: int) -> str:
    """What the operator reads when a rebooted host stays away."""
    return (
        f"gpufleet: {host_name} did not come back within reboot_timeout_s={reboot_timeout} s "
        "after the driver reboot. Fix: check its console or BMC (power, boot errors, network); "
        "once it answers SSH, run the deploy again (raise reboot_timeout_s if it boots slowly)."
    )


def _boot_id(host: Host) -> str | None:
    try:
        ok, output = host.run_shell_command(StringCommand(BOOT_ID))
    except (OSError, EOFError, SSHException) as exc:  # a half-closed SSH session
        logger.debug(f"boot ID not read: {exc}")
        return None
    lines = output.stdout_lines if ok else []
    return lines[0].strip() if lines else None


def _before_reboot(state: State, host: Host, boot_before: list[str]) -> bool:
    # The sudo askpass file would be left behind by the reboot; pyinfra re-uploads it if needed.
    remove_any_sudo_askpass_file(host)
    boot_before.append(_boot_id(host) or "")
    return True


def _wait_for_reboot(
    state: State, host: Host, boot_before: list[str], delay: int, reboot_timeout: int
) -> bool:
    """Reconnect until the host runs a new boot (its boot ID changed), else explain and fail."""
    _sleep(delay)
    clear_askpass_cache(host)
    host.disconnect()
    deadline = time.monotonic() + reboot_timeout
    while True:
        host.connect(show_errors=False)
        if host.connected and _boot_id(host) not in (None, *boot_before):
            return True
        if time.monotonic() >= deadline:
            connection.explained.add(host)
            logger.error(f"{host.print_prefix}{did_not_come_back(host.name, reboot_timeout)}")
            return False
        host.disconnect()
        _sleep(1)
