"""Run one gpufleet operation's real code on canned facts, as tests/operations' JSON cases do."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from pyinfra.api import StringCommand
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeState, create_host


def operation_commands(
    operation: str, facts: dict[str, Any], **kwargs: Any
) -> tuple[list[StringCommand], str | None]:
    """The commands ``gpufleet.operations.<operation>`` yields for ``kwargs`` on a host with
    ``facts`` (pyinfra-testing's fact format), and the no-op description it set."""
    module_name, name = operation.rsplit(".", 1)
    op = getattr(import_module(f"gpufleet.operations.{module_name}"), name)
    state = FakeState()
    host = create_host(state, facts=facts)
    with ctx_state.use(state), ctx_host.use(host):
        commands = list(op._inner(**kwargs))
    return commands, host.noop_description


def run_operation(
    operation: str, facts: dict[str, Any], **kwargs: Any
) -> tuple[list[str], str | None]:
    """Like ``operation_commands``, with each command as the raw text the host would run."""
    commands, noop = operation_commands(operation, facts, **kwargs)
    return [c.get_raw_value() if isinstance(c, StringCommand) else str(c) for c in commands], noop
