"""The deploy's use of stamps: skip a host whose plan is known empty; stamp one that planned none.

Example (the deploy file)::

    plan = node_plan()
    if not stamp_holds(plan, deploy_file=__file__):
        ...                  # every stage, as before; recorded, and stamped if it planned nothing
        stamp_done(plan)     # the plan reached its end: only such a plan is ever stamped

``GPUFLEET_STAMPS=read`` uses stamps but writes none (``gpufleet drift``); ``off`` ignores them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

from pyinfra.api import DeployError
from pyinfra.api.facts import _handle_fact_kwargs
from pyinfra.api.host import Host
from pyinfra.api.state import BaseStateCallback, State, StateStage
from pyinfra.context import ctx_host, ctx_state

from gpufleet.stages.node import node_plan
from gpufleet.stages.preflight import announce
from gpufleet.stages.validation_payload import payload_sources
from gpufleet.stamp import record, store
from gpufleet.stamp.ahead import taken
from gpufleet.stamp.batch import batch_reads
from gpufleet.stamp.canonical import NotCanonical
from gpufleet.stamp.inputs import inputs_digest
from gpufleet.stamp.replay import StampReplay, differences

_LOG = logging.getLogger("gpufleet.stamp")
# The replay is one `sh -c` argument: Linux caps one argument at 128 KiB (MAX_ARG_STRLEN).
MAX_REPLAY_CHARS = 100_000
_INPUTS: WeakKeyDictionary[Host, str] = WeakKeyDictionary()
_WATCHED: WeakSet[State] = WeakSet()
# Hosts whose deploy file called stamp_done: a plan stopped by an exception never gets there.
_FINISHED: WeakSet[Host] = WeakSet()
MODES = ("on", "read", "off")


def stamp_mode() -> str:
    """``$GPUFLEET_STAMPS``: on (the default), read (use stamps, write none) or off."""
    mode = os.environ.get("GPUFLEET_STAMPS", "on").strip().lower() or "on"
    if mode not in MODES:
        raise DeployError(
            f"GPUFLEET_STAMPS={mode!r} in the environment is not a stamp mode. "
            f"Fix: set it to one of {', '.join(MODES)}, or unset it."
        )
    return mode


def stamp_holds(plan: Any, deploy_file: str) -> bool:
    """True when this host's last empty plan read exactly what it reads now: nothing to plan.

    Otherwise the host's fact reads are recorded from here on, and a stamp is written when the
    run ends having planned (or run) nothing on it. One round trip when a stamp exists.
    """
    host: Host = ctx_host.get()
    state: State = ctx_state.get()
    if not plan.spec.deploy_stamp or stamp_mode() == "off":
        return False
    if state not in _WATCHED:
        state.add_callback_handler(_Committer())
        _WATCHED.add(state)
    try:
        served = {}
        if plan.is_cache_host:
            served = {other.name: node_plan(other) for other in state.inventory.get_active_hosts()}
        inputs = inputs_digest(plan, host, deploy_file, payload_sources(), served)
    except NotCanonical as exc:
        record.start(host).refuse(f"an input has no stable form ({exc})")
        return False
    _INPUTS[host] = inputs
    stamp, replies = taken(host) or (store.load(host.name), None)  # read with the probe, as a rule
    why = _why_not(host, state, stamp, replies, inputs)
    if why is not None:
        _LOG.debug("%s: planned in full: %s", host.name, why)
        if stamp is not None and stamp_mode() == "on":
            store.forget(host.name)  # whatever this plan ends in, that stamp no longer holds
        record.start(host)
        return False
    host.noop("nothing to plan: every fact and input reads as in the last run that changed nothing")
    announce(plan, unchanged="; unchanged (deploy stamp)")
    return True


def stamp_done(plan: Any) -> None:
    """Mark the current host's plan as complete: call it after the deploy file's last stage.

    A plan that stops early (a ``DeployError``, an ``OperationError`` or any other exception
    while planning) never reaches this call, so it is never stamped however empty it was.
    """
    _FINISHED.add(ctx_host.get())


def _why_not(
    host: Host, state: State, stamp: store.Stamp | None, replies: Any, inputs: str
) -> str | None:
    if stamp is None:
        return "no stamp"
    if stamp.inputs != inputs:
        return "the inputs changed"
    if stamp.executor != replay_executor(state, host):
        return "the connector arguments changed"
    if any(record.local_file_digest(path) != known for path, known in stamp.local_files.items()):
        return "a local file changed"
    if replies is None:
        batch = batch_reads(stamp.facts)
        replies = batch.unpack(host.get_fact(StampReplay, commands=batch.commands))
    changed = differences(stamp.facts, replies)
    return "; ".join(changed) if changed else None


def replay_executor(state: State, host: Host) -> str:
    """The connector arguments the replay runs with (those of a fact read outside operations)."""
    _fact_kwargs, global_kwargs = _handle_fact_kwargs(state, host, StampReplay, None, None)
    return record.executor_digest(dict(global_kwargs))


def plan_was_empty(state: State, host: Host) -> bool:
    """Whether the run planned (``--dry``) or ran nothing on ``host`` but bookkeeping."""
    operations = [
        data.operation_meta
        for data in state.ops.get(host, {}).values()
        if not record.is_bookkeeping(data.operation_meta)
    ]
    if state.current_stage == StateStage.Prepare:
        return state.should_check_for_changes() and not any(m.will_change for m in operations)
    if state.current_stage == StateStage.Disconnect:
        return all(m.is_complete() and m.did_succeed() and not m.did_change() for m in operations)
    return False  # stopped while connecting or executing


def commit(state: State, host: Host) -> Path | None:
    """Write the host's stamp if its recorded run planned nothing; the stamp's path, or None."""
    recording = record.records(host)
    inputs = _INPUTS.get(host)
    if recording is None or inputs is None:
        return None
    why = recording.unusable
    if why is None and stamp_mode() != "on":
        why = "GPUFLEET_STAMPS says read only"
    if why is None and host not in _FINISHED:
        why = "the plan did not reach the end of the deploy file"
    if why is None and host in state.failed_hosts:
        why = "the host failed"
    if why is None and not plan_was_empty(state, host):
        why = "the run planned or ran changes"
    if why is not None:
        _LOG.debug("%s: no deploy stamp: %s", host.name, why)
        return None
    if sum(len(read.command) for read in recording.facts) > MAX_REPLAY_CHARS:
        _LOG.debug("%s: no deploy stamp: its replay would be too long", host.name)
        return None
    executor = recording.executor or replay_executor(state, host)
    stamp = store.Stamp(host.name, inputs, executor, recording.facts, recording.local_files)
    return store.save(stamp)


class _Committer(BaseStateCallback):
    @staticmethod
    def host_disconnect(state: State, host: Host) -> None:
        try:
            commit(state, host)
        except OSError as exc:  # a stamp is an optimisation: the run's result stands without it
            _LOG.warning("%s: the deploy stamp could not be written: %s", host.name, exc)
