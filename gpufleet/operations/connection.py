"""Say "connection to HOST lost during OPERATION" when a host's SSH session drops mid-operation.

pyinfra reports a command whose channel closed without an exit status as ``Error: executed 0
commands``; this callback adds what happened and what to do. Operations that already told the
operator why the host is gone (the reboot wait) put the host in ``explained``.
"""

from __future__ import annotations

from weakref import WeakSet

from pyinfra import logger
from pyinfra.api.host import Host
from pyinfra.api.state import BaseStateCallback, State
from pyinfra.context import ctx_state

explained: WeakSet[Host] = WeakSet()
_watched: WeakSet[State] = WeakSet()


def connection_lost(host: Host) -> bool:
    """Whether the host's SSH transport is closed (the host went down or cut the link)."""
    client = getattr(host.connector, "client", None)
    if client is None:
        return False
    transport = client.get_transport()
    return transport is None or not transport.is_active()


def lost_message(host_name: str, operation: str) -> str:
    """What the operator reads when a host vanished while ``operation`` ran on it."""
    return (
        f"gpufleet: connection to {host_name} lost during {operation!r} (host down, rebooted "
        f"or its network cut). Fix: when {host_name} answers SSH again, run the deploy again: "
        "gpufleet finishes an interrupted dpkg first and redoes what was cut off."
    )


class ConnectionLossReporter(BaseStateCallback):
    """pyinfra state callback: explains an operation that failed because its host vanished."""

    @staticmethod
    def operation_host_error(
        state: State, host: Host, op_hash, retry_count: int = 0, max_retries: int = 0
    ):
        if host in explained or not connection_lost(host):
            return
        explained.add(host)
        operation = ", ".join(sorted(state.get_op_meta(op_hash).names)) or "an operation"
        logger.error(f"{host.print_prefix}{lost_message(host.name, operation)}")


def watch() -> None:
    """Report lost connections of the current pyinfra run (once per run; stages call it)."""
    state = ctx_state.get()  # the State itself, not pyinfra's context proxy
    if state is None or state in _watched:
        return
    _watched.add(state)
    state.add_callback_handler(ConnectionLossReporter())
