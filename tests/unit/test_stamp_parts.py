"""The deploy stamp's parts (issue 18): digests, the replay's shell script, what the recorder
refuses, what a stamp file must be, and the keyring's witness (the environment check's:
test_env_witness.py)."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api import MaskString, StringCommand
from pyinfra.api.state import StateStage

from gpufleet.operations.env_check import EnvProblems
from gpufleet.stages.host_probe import HostState
from gpufleet.stamp import gate, inputs, record, store
from gpufleet.stamp.canonical import NotCanonical, digest
from gpufleet.stamp.inputs import tree_digest
from gpufleet.stamp.replay import StampReplay, differences, fact_class, replay_script, value_digest
from tests.waiting import pass_a_ctime_tick


def replay_here(commands: list[str]) -> list[tuple[int, list[str]]] | None:
    """The replay's script through this machine's sh, parsed by the fact."""
    done = subprocess.run(["sh", "-c", replay_script(commands)], capture_output=True, text=True)
    fact = StampReplay()
    fact.command(commands)
    return fact.process(done.stdout.split("\n")[:-1])


def test_digest_is_the_same_for_equal_values_in_any_order() -> None:
    assert digest({"a": {3, 1, 2}, "b": (1, "x")}) == digest({"b": [1, "x"], "a": {2, 3, 1}})
    assert digest({"a": 1}) != digest({"a": "1"})
    with pytest.raises(NotCanonical):
        digest({"a": object()})  # its repr would name an address: never equal across runs


def test_replay_gives_each_command_its_lines_and_status_as_pyinfra_reads_them() -> None:
    commands = ["echo a; echo b", "printf x", "exit 3", "true", "printf '\\n\\n'", "echo 'it''s'"]
    assert replay_here(commands) == [
        (0, ["a", "b"]),
        (0, ["x"]),  # no final newline: the same single line
        (3, []),
        (0, []),
        (0, ["", ""]),
        (0, ["its"]),
    ]


def test_a_replay_cut_short_is_no_answer() -> None:
    fact = StampReplay()
    fact.command(["true"])
    assert fact.process([]) is None
    assert fact.process(["not base64 !", "gpufleet-replay: done"]) is None
    unread = ["the facts could not be read again in one round trip"]
    assert differences([_read("x")], None) == unread


def _read(command: str, value: str = "") -> record.FactRead:
    read = record.FactRead("gpufleet.operations.probes:PathExists", command, (0,), value)
    return dataclasses.replace(read, arguments={"path": "/x"})


def test_a_value_that_reads_differently_is_named() -> None:
    same = value_digest(_read("c"), 0, ["yes"])[1]
    facts = [_read("c", same), _read("d", same)]
    assert differences(facts, [(0, ["yes"]), (0, ["yes"])]) == []
    assert differences(facts, [(0, ["yes"]), (0, [])]) == [
        "gpufleet.operations.probes:PathExists reads differently"
    ]


def test_only_pyinfra_and_gpufleet_facts_are_ever_imported() -> None:
    for name in ("os:system", "subprocess:Popen", "gpufleet_evil.x:Fact", "pyinfra:__init__"):
        with pytest.raises(ValueError):
            fact_class(name)
    assert fact_class("gpufleet.operations.env_check:EnvProblems") is EnvProblems


def test_the_recorder_refuses_a_command_that_carries_a_secret() -> None:
    pending = record._Pending(arguments={})
    record._capture(pending, StringCommand("curl -u", MaskString("user:secret")), {})
    assert pending.command is None and pending.problem and "secret" in pending.problem


def test_a_command_that_read_two_values_in_one_run_is_refused() -> None:
    recording = record.Recording()
    record._add(recording, _read("c", "v1"))
    record._add(recording, _read("c", "v1"))  # read again, the same: kept once
    assert len(recording.facts) == 1 and recording.unusable is None
    record._add(recording, _read("c", "v2"))
    assert recording.unusable == (
        "fact gpufleet.operations.probes:PathExists read two different values in one run"
    )


class _Meta:
    """Stands in for pyinfra's OperationMeta after execution."""

    def __init__(self, changed: bool) -> None:
        self.changed = changed

    def is_complete(self) -> bool:
        return True

    def did_succeed(self) -> bool:
        return True

    def did_change(self) -> bool:
        return self.changed


def test_bookkeeping_operations_do_not_make_a_run_one_that_changed_something() -> None:
    lock, other = _Meta(True), _Meta(False)
    record.bookkeeping(lock)
    host = object()
    state = SimpleNamespace(
        current_stage=StateStage.Disconnect,
        ops={
            host: {
                "a": SimpleNamespace(operation_meta=lock),
                "b": SimpleNamespace(operation_meta=other),
            }
        },
    )
    assert gate.plan_was_empty(state, host)  # type: ignore[arg-type]
    state.ops[host]["c"] = SimpleNamespace(operation_meta=_Meta(True))
    assert not gate.plan_was_empty(state, host)  # type: ignore[arg-type]
    state.current_stage = StateStage.Execute  # stopped mid-run: never stamped
    del state.ops[host]["c"]
    assert not gate.plan_was_empty(state, host)  # type: ignore[arg-type]


def test_a_stamp_file_must_be_its_owners_alone_and_name_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_STAMP_DIR", str(tmp_path / "stamps"))
    stamp = store.Stamp("gpu-a", "i", "e", [_read("c", "v")], {"/r/base.json": None})
    path = store.save(stamp)
    assert store.load("gpu-a") == stamp
    os.chmod(path, 0o640)
    assert store.load("gpu-a") is None
    os.chmod(path, 0o600)
    path.write_text(path.read_text().replace('"gpu-a"', '"gpu-b"'))
    assert store.load("gpu-a") is None
    assert store.load("gpu-a") is None
    store.save(stamp)
    os.chmod(path.parent, 0o770)  # a folder others may write to: its stamps are not trusted
    assert store.load("gpu-a") is None
    os.chmod(path.parent, 0o700)
    assert store.load("gpu-a") == stamp
    path.unlink()
    (tmp_path / "elsewhere.json").write_text("{}")
    path.symlink_to(tmp_path / "elsewhere.json")
    assert store.load("gpu-a") is None


def test_an_inventory_secret_enters_a_digest_only_as_its_own_digest() -> None:
    from pyinfra.api.hiddenvalue import HiddenValue

    assert digest({"p": HiddenValue("s3cret")}) == digest({"p": HiddenValue("s3cret")})
    assert digest({"p": HiddenValue("s3cret")}) != digest({"p": HiddenValue("other")})


def test_the_probe_fields_that_change_every_run_stay_out_of_a_stamp() -> None:
    from gpufleet.spec import NodeSpec
    from gpufleet.stages.node import NodePlan
    from gpufleet.stamp.inputs import plan_view

    state = HostState(os_id="ubuntu", free_disk_kib=10, gpu_processes=("1 python",))
    spec = NodeSpec.from_host_data({"gpu_less": True})

    def view(probed: HostState) -> str:
        return digest(plan_view(NodePlan(spec, probed, None, unsupported="not provisioned")))

    calm = dataclasses.replace(state, free_disk_kib=99, gpu_processes=())
    assert view(state) == view(calm)
    assert view(state) != view(dataclasses.replace(state, packages={"libnccl2": "2.27.7"}))


def test_the_sources_digest_follows_every_shipped_file(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("A = 1\n")
    sources = {"pkg": tmp_path / "pkg"}
    before = tree_digest(sources)
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert tree_digest(sources) == before
    (tmp_path / "pkg" / "a.py").write_text("A = 2\n")
    assert tree_digest(sources) != before


def test_the_sources_digest_reads_again_every_file_that_may_have_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every file here is younger than the racy window (2 s: files changed that close to the
    # last write of what is known are read again, review finding 12): the window is closed.
    monkeypatch.setattr(inputs, "RACY_NS", -(10**12))
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("A = 1\n")
    (package / "b.py").write_text("B = 1\n")
    sources, known = {"pkg": package}, tmp_path / "state" / "sources.json"
    first = tree_digest(sources, known)
    assert first == tree_digest(sources)  # the same digest, with or without what is known
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    read: list[Path] = []
    real = inputs._sha256
    monkeypatch.setattr(inputs, "_sha256", lambda path: read.append(path) or real(path))
    assert tree_digest(sources, known) == first and read == []  # nothing read again
    pass_a_ctime_tick(tmp_path)  # a change time is the kernel's coarse clock
    kept = (package / "a.py").stat()
    (package / "a.py").write_text("A = 2\n")  # the same size, the old times put back
    os.utime(package / "a.py", ns=(kept.st_atime_ns, kept.st_mtime_ns))
    changed = tree_digest(sources, known)
    assert read == [package / "a.py"]  # its change time told: read again, b.py was not
    assert changed == tree_digest(sources) != first
    known.chmod(0o644)  # what others could have written is never trusted
    known.write_text(known.read_text().replace(real(package / "b.py"), "0" * 64))
    assert tree_digest(sources, known) == tree_digest(sources)


def test_the_keyring_witness_follows_the_keyring_and_gpg(tmp_path: Path) -> None:
    from gpufleet.operations.probes import KeyringFingerprints

    keyring = tmp_path / "nvidia.gpg"
    keyring.write_bytes(b"\x99\x01\x0dkey one")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gpg").write_text("#!/bin/sh\n# a gpg\n")
    (tools / "gpg").chmod(0o755)
    witness = KeyringFingerprints().stamp_witness(str(keyring)).get_raw_value()
    path = f"{tools}:/usr/bin:/bin"

    def seen() -> str:
        return subprocess.run(
            ["sh", "-c", witness], capture_output=True, text=True, env={"PATH": path}
        ).stdout

    before = seen()
    assert before == seen() and len(before.splitlines()) == 2
    pass_a_ctime_tick(tmp_path)  # a change time is the kernel's coarse clock
    (tools / "gpg").write_text("#!/bin/sh\n#another\n")  # the same size: its change time tells
    after_gpg = seen()
    assert after_gpg != before
    keyring.write_bytes(b"\x99\x01\x0dkey two")
    assert seen() != after_gpg
    keyring.unlink()
    assert seen() == ""


def test_the_last_host_failing_a_fact_names_the_fact_not_this_module(monkeypatch) -> None:
    # review §3 row 8: "pyinfra error in .../gpufleet/stamp/record.py line 166: No hosts
    # remaining!" after a fact failed on the last host read as a bug in gpufleet
    from pyinfra.api import facts as pyinfra_facts
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra.api.host import Host
    from pyinfra.facts.systemd import SystemdStatus

    from gpufleet.stamp import record

    def failing(*_args: object, **_kwargs: object) -> object:
        raise PyinfraError("No hosts remaining!")

    class AnyHost:  # no recording: the fact goes straight to pyinfra's getter
        pass

    monkeypatch.setattr(pyinfra_facts, "_get_fact", failing)
    monkeypatch.setattr(Host, "run_shell_command", Host.run_shell_command)
    monkeypatch.setattr(record, "_INSTALLED", [])
    record.install()
    with pytest.raises(PyinfraError) as caught:
        pyinfra_facts._get_fact(None, AnyHost(), SystemdStatus)
    assert str(caught.value) == (
        "No hosts remaining! (the last host could not read the fact systemd.SystemdStatus; "
        "its error is above)"
    )
