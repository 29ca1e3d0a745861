"""What a host's plan read: every fact's exact command, how it ran and a digest of its value.

pyinfra has no hook for fact reads, so ``install()`` wraps its fact getter
(``pyinfra.api.facts._get_fact``, pinned pyinfra 3.10) and ``Host.run_shell_command`` while a
fact is being read; ``tests/unit/test_stamp_cli.py`` fails if either stops being called.

Example::

    install()
    start(host)          # from here on, the host's fact reads are recorded
    ...                  # plan and run the deploy
    recording = records(host)
    recording.facts[0].command   # "dpkg-query -W ..."
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

from pyinfra.api import facts as pyinfra_facts
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
from pyinfra.api.command import StringCommand
from pyinfra.api.exceptions import MissingCommandError, PyinfraError
from pyinfra.api.host import Host
from pyinfra.context import ctx_host

from gpufleet.stamp.canonical import NotCanonical, digest
from gpufleet.stamp.witnesses import Witness, witness_of

# Fact classes a stamp may name: they are imported again when the stamp is checked. Never one
# whose command is its argument (pyinfra's server.Command): a stamp's commands run as root.
TRUSTED_MODULES = ("pyinfra.facts.", "gpufleet.")
UNTRUSTED_FACTS = ("pyinfra.facts.server:Command",)
# Passwords change how a command runs, not what it prints: never digested, never stored.
_SECRET_KEYS = {"_sudo_password", "_su_password"}


@dataclass(frozen=True)
class FactRead:
    """One fact read: the fact class (``module:qualname``), the command pyinfra ran, the exit
    codes it counts as success, and ``value`` (a digest of what pyinfra handed the plan)."""

    fact: str
    command: str
    success_codes: tuple[int, ...]
    value: str
    missing_command: bool = False  # the fact's required binary was absent (default value)
    # The fact's own arguments (plain JSON): some facts' ``process`` needs ``command`` to have
    # run on the same object first (pyinfra's FileContents), so the replay calls both.
    arguments: dict[str, Any] = field(default_factory=dict)
    # ``command`` is the fact's witness (see ``witness_value``), not the fact itself.
    witness: bool = False


@dataclass
class Recording:
    """The fact reads of one host in one run; ``unusable`` says why no stamp can be made."""

    facts: list[FactRead] = field(default_factory=list)
    executor: str | None = None  # digest of the connector arguments every read ran with
    local_files: dict[str, str | None] = field(default_factory=dict)  # control-node path -> sha256
    unusable: str | None = None

    def refuse(self, reason: str) -> None:
        if self.unusable is None:
            self.unusable = reason


@dataclass
class _Pending:
    arguments: dict[str, Any] | None = None
    command: str | None = None
    connector_arguments: dict[str, Any] = field(default_factory=dict)
    executor: str | None = None
    success_codes: tuple[int, ...] = (0,)
    problem: str | None = None
    witness: str | None = None  # the witness's value, when the read was replaced by its witness


_RECORDINGS: WeakKeyDictionary[Host, Recording] = WeakKeyDictionary()
# Operations that run on every execution and leave the host as they found it (the deploy lock
# taken, then released): they do not make a run one that changed something.
_BOOKKEEPING: WeakSet[Any] = WeakSet()
_PENDING: WeakKeyDictionary[Host, _Pending] = WeakKeyDictionary()
_INSTALLED: list[bool] = []


def start(host: Host) -> Recording:
    """Record ``host``'s fact reads from now on (a fresh recording)."""
    install()
    _RECORDINGS[host] = recording = Recording()
    return recording


def records(host: Host) -> Recording | None:
    """The recording of ``host`` in this run, or None when none was started."""
    return _RECORDINGS.get(host)


def local_file(path: str | Path) -> None:
    """Note that the current host's plan read ``path`` on the control node (its content, or
    its absence, enters the stamp)."""
    recording = records(ctx_host.get())
    if recording is not None:
        recording.local_files[str(path)] = local_file_digest(str(path))


def local_file_digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def bookkeeping(meta: Any) -> Any:
    """Mark an operation (the meta pyinfra returns) as one that leaves the host as it found it:
    it runs every time, yet a run whose other operations change nothing is still stamped.

    Example: ``bookkeeping(lock.deploy_lock(name="deploy lock taken"))``
    """
    _BOOKKEEPING.add(meta)
    return meta


def is_bookkeeping(meta: Any) -> bool:
    return meta in _BOOKKEEPING


def executor_digest(arguments: dict[str, Any]) -> str:
    """Digest of the connector arguments a command runs with (sudo, su, env, shell...)."""
    kept = {
        key: (bool(value) if key in _SECRET_KEYS else value)
        for key, value in arguments.items()
        if key in CONNECTOR_ARGUMENT_KEYS
    }
    return digest(kept)


def fact_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


NO_HOSTS_LEFT = "No hosts remaining!"  # pyinfra's PyinfraError when its last host failed


def no_hosts_left(cls: type) -> Exception:
    """The error that stops the run when the last host failed on a fact: pyinfra's words, the
    fact, and no line of this file (pyinfra names the deepest frame outside itself, this one,
    which reads as a bug in gpufleet)."""
    from gpufleet.stages.inventory_error import cli_error

    name = f"{cls.__module__.removeprefix('pyinfra.facts.')}.{cls.__qualname__}"
    why = f"the last host could not read the fact {name}; its error is above"
    return cli_error(PyinfraError, f"{NO_HOSTS_LEFT} ({why})")


def install() -> None:
    """Wrap pyinfra's fact getter and command runner once per process."""
    if _INSTALLED:
        return
    get_fact = pyinfra_facts._get_fact
    run_shell_command = Host.run_shell_command

    def recorded_get_fact(state: Any, host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        try:
            return _recorded_get_fact(state, host, cls, *args, **kwargs)
        except PyinfraError as exc:
            if str(exc) != NO_HOSTS_LEFT:
                raise
            raise no_hosts_left(cls) from None

    def _recorded_get_fact(state: Any, host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        recording = _RECORDINGS.get(host)
        if recording is None or host in _PENDING:
            return get_fact(state, host, cls, *args, **kwargs)
        arguments = _plain_arguments(state, host, cls, args)
        witness = witness_of(cls)
        # The witness is read before its fact (review finding 7): a change between the two then
        # shows as a witness that differs next time, never as the new normal.
        before = None
        if witness is not None and arguments is not None:
            before = _witness_before(state, host, cls, args, witness, arguments, run_shell_command)
        _PENDING[host] = pending = _Pending(arguments=arguments)
        try:
            value = get_fact(state, host, cls, *args, **kwargs)
        except Exception as exc:
            missing = isinstance(exc, MissingCommandError)
            _note(recording, cls, pending, None, missing=missing, error=None if missing else exc)
            raise
        finally:
            _PENDING.pop(host, None)
        if witness is not None and pending.arguments is not None:
            pending = _witnessed(pending, before)
        _note(recording, cls, pending, value)
        return value

    def recorded_run_shell_command(self: Host, command: Any, *args: Any, **kwargs: Any) -> Any:
        pending = _PENDING.get(self)
        if pending is not None and pending.command is None and pending.problem is None:
            _capture(pending, command, kwargs)
        return run_shell_command(self, command, *args, **kwargs)

    pyinfra_facts._get_fact = recorded_get_fact
    Host.run_shell_command = recorded_run_shell_command  # type: ignore[method-assign]
    _INSTALLED.append(True)


def _plain_arguments(
    state: Any, host: Host, cls: type, args: tuple[Any, ...]
) -> dict[str, Any] | None:
    """The fact's own keyword arguments as plain JSON data, or None when they are not."""
    fact_args = args[0] if args else None
    fact_kwargs = args[1] if len(args) > 1 else None
    try:
        arguments, _global = pyinfra_facts._handle_fact_kwargs(
            state, host, cls, fact_args, fact_kwargs
        )
        # getcallargs names the bound fact object too
        plain = json.loads(json.dumps({k: v for k, v in arguments.items() if k != "self"}))
    except (TypeError, ValueError):
        return None
    return plain if isinstance(plain, dict) else None


def shell_text(command: Any) -> tuple[str | None, str | None]:
    """``(the shell text of a command, None)``, or ``(None, why it cannot be stamped)``: not a
    shell command, or one that carries a secret (stamps never hold one)."""
    if isinstance(command, str):
        return command, None
    if not isinstance(command, StringCommand):
        return None, f"a fact ran a {type(command).__name__}, not a shell command"
    raw = command.get_raw_value()
    if raw != command.get_masked_value():
        return None, "a fact's command carries a secret (it is never stored)"
    return raw, None


def _capture(pending: _Pending, command: Any, arguments: dict[str, Any]) -> None:
    raw, problem = shell_text(command)
    if raw is None:
        pending.problem = problem
        return
    try:
        pending.executor = executor_digest(arguments)
    except NotCanonical as exc:
        pending.problem = f"a fact ran with connector arguments of no stable form ({exc})"
        return
    pending.command = raw
    pending.connector_arguments = dict(arguments)
    pending.success_codes = tuple(arguments.get("_success_exit_codes") or (0,))


def witness_value(ok: bool, lines: list[str]) -> str:
    """The value a witness stands for: whether it succeeded, and its stdout lines."""
    return digest({"ok": ok, "lines": lines})


@dataclass(frozen=True)
class _WitnessRead:
    """A witness run before its fact: its command, the connector arguments it ran with, what
    it printed (or why it could not run)."""

    command: str | None
    connector_arguments: dict[str, Any]
    ok: bool = False
    lines: tuple[str, ...] = ()
    problem: str | None = None


def _witness_before(
    state: Any,
    host: Host,
    cls: type,
    args: tuple[Any, ...],
    witness: Witness,
    arguments: dict[str, Any],
    run: Any,
) -> _WitnessRead:
    """Run the fact's witness now, before the fact, with the connector arguments pyinfra will
    give the fact: a cheaper command whose stdout stays the same only while the fact's value
    would (``EnvProblems``: the change time of every file it reads, instead of checking each
    against pip's RECORD; gpufleet.stamp.witnesses)."""
    command, problem = shell_text(witness(**arguments))
    fact_args = args[0] if args else None
    fact_kwargs = args[1] if len(args) > 1 else None
    try:
        _kwargs, global_kwargs = pyinfra_facts._handle_fact_kwargs(
            state, host, cls, fact_args, fact_kwargs
        )
    except (TypeError, ValueError) as exc:
        return _WitnessRead(None, {}, problem=f"a witness's arguments: {exc}")
    shell = getattr(cls(), "shell_executable", None)
    if shell:
        global_kwargs["_shell_executable"] = shell
    connector = {k: v for k, v in global_kwargs.items() if k in CONNECTOR_ARGUMENT_KEYS}
    if command is None or not host.connected:
        return _WitnessRead(None, connector, problem=problem or "the host is not connected yet")
    ok, output = run(host, StringCommand(command), **connector)
    return _WitnessRead(command, connector, bool(ok), tuple(output.stdout_lines))


def _witnessed(pending: _Pending, before: _WitnessRead | None) -> _Pending:
    """The fact's read replaced by its witness, read before it with the same connector
    arguments (else the read cannot be stamped)."""
    if pending.command is None or pending.problem is not None or pending.arguments is None:
        return pending
    if before is None or before.command is None:
        problem = (before.problem if before else None) or "a witness could not be read"
        return dataclasses.replace(pending, problem=problem)
    ran_with = {
        k: v for k, v in pending.connector_arguments.items() if k in CONNECTOR_ARGUMENT_KEYS
    }
    if ran_with != before.connector_arguments:
        return dataclasses.replace(
            pending, problem="a witness ran with other connector arguments than its fact"
        )
    return _Pending(
        arguments={},
        command=before.command,
        connector_arguments=pending.connector_arguments,
        executor=pending.executor,
        success_codes=pending.success_codes,
        problem=pending.problem,
        witness=witness_value(before.ok, list(before.lines)),
    )


def _note(
    recording: Recording,
    cls: type,
    pending: _Pending,
    value: Any,
    *,
    missing: bool = False,
    error: Exception | None = None,
) -> None:
    name = fact_name(cls)
    if error is not None:
        recording.refuse(f"fact {cls.__name__} raised {type(error).__name__}")
    elif pending.problem is not None:
        recording.refuse(pending.problem)
    elif pending.command is None:
        recording.refuse(f"fact {cls.__name__} ran no command (a connector fact)")
    elif pending.arguments is None:
        recording.refuse(f"fact {cls.__name__}'s arguments are not plain data")
    elif not name.startswith(TRUSTED_MODULES) or name in UNTRUSTED_FACTS:
        recording.refuse(f"fact {name} is not one a stamp may name")
    elif getattr(cls, "check_preconditions", None) is not _BASE_PRECONDITIONS:
        recording.refuse(f"fact {cls.__name__} has preconditions of its own")
    elif recording.executor not in (None, pending.executor):
        recording.refuse(f"fact {cls.__name__} ran with other connector arguments (sudo, env...)")
    else:
        try:
            value_digest = pending.witness or digest(value)
        except NotCanonical as exc:
            recording.refuse(f"fact {cls.__name__}'s value has no stable form ({exc})")
            return
        read = FactRead(
            name, pending.command, pending.success_codes, value_digest, missing,
            pending.arguments, witness=pending.witness is not None,
        )  # fmt: skip
        recording.executor = pending.executor
        _add(recording, read)


def _add(recording: Recording, read: FactRead) -> None:
    """Keep one read per command: in a run that changed nothing, a command read twice must
    print the same both times (else its value is not stable enough to stamp)."""
    for known in recording.facts:
        if (known.fact, known.command, known.arguments) == (
            read.fact,
            read.command,
            read.arguments,
        ):
            if known != read:
                recording.refuse(f"fact {read.fact} read two different values in one run")
            return
    recording.facts.append(read)


_BASE_PRECONDITIONS = pyinfra_facts.FactBase.check_preconditions
