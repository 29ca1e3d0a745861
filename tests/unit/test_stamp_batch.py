"""The replay's merged commands (gpufleet.stamp.batch): each read gets exactly what its own
command prints. File digests run here by this machine's sh, stat and sha256sum; systemd units
from systemctl's output recorded on a sandbox host (tests/fixtures/systemd)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from pyinfra.facts.systemd import SystemdEnabled, SystemdStatus

from gpufleet.operations.probes import FileDigest
from gpufleet.stamp.batch import batch_reads
from gpufleet.stamp.canonical import digest
from gpufleet.stamp.record import FactRead, fact_name, witness_value
from gpufleet.stamp.replay import (
    MISSING_COMMAND,
    StampReplay,
    differences,
    replay_script,
    split_lines,
)


def run(command: str) -> tuple[int, list[str]]:
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return done.returncode, split_lines(done.stdout)


def digest_read(path: Path) -> FactRead:
    """A FileDigest read as the recorder makes it: the fact's command, run now."""
    command = FileDigest().command(path=str(path)).get_raw_value()
    status, lines = run(command)
    value = FileDigest().process(lines) if status == 0 and lines else None
    return FactRead(
        fact_name(FileDigest), command, (0,), digest(value), arguments={"path": str(path)}
    )


def other_read(command: str) -> FactRead:
    """Any other read (here a witness: its value is its stdout lines), run now."""
    status, lines = run(command)
    value = witness_value(status == 0, lines)
    return FactRead("pyinfra.facts.server:Command", command, (0,), value, witness=True)


def replay(commands: list[str]) -> list[tuple[int, list[str]]] | None:
    status, lines = run(replay_script(commands))
    fact = StampReplay()
    fact.command(commands)
    return fact.process(lines) if status == 0 else None


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    (tmp_path / "a.conf").write_text("alpha\n")
    (tmp_path / "b c.conf").write_text("beta\n")  # a space in the name
    (tmp_path / "b c.conf").chmod(0o600)
    (tmp_path / "folder").mkdir()  # not a regular file: no digest
    return [
        tmp_path / "a.conf",
        tmp_path / "b c.conf",
        tmp_path / "folder",
        tmp_path / "absent",
    ]


def test_each_read_gets_what_its_own_command_prints(files: list[Path]) -> None:
    reads = [other_read("echo one"), *(digest_read(p) for p in files), other_read("echo two")]
    batch = batch_reads(reads)
    assert len(batch.commands) == 3  # the two others, and one for the four digests
    unpacked = batch.unpack(replay(batch.commands))
    assert unpacked == [run(read.command) for read in reads]
    assert differences(reads, unpacked) == []


def test_a_changed_file_reads_differently(files: list[Path]) -> None:
    reads = [digest_read(p) for p in files]
    files[0].write_text("changed\n")
    files[1].chmod(0o644)
    (files[3]).write_text("now here\n")
    batch = batch_reads(reads)
    changed = differences(reads, batch.unpack(replay(batch.commands)))
    assert changed == [f"{fact_name(FileDigest)} reads differently"] * 3


def test_two_files_swapping_contents_is_seen(files: list[Path]) -> None:
    reads = [digest_read(p) for p in files[:2]]
    first, second = files[0].read_text(), files[1].read_text()
    files[0].write_text(second)
    files[1].write_text(first)
    files[0].chmod(0o600)
    files[1].chmod(0o644)
    batch = batch_reads(reads)
    assert len(differences(reads, batch.unpack(replay(batch.commands)))) == 2


def test_a_line_of_another_file_is_never_handed_on(files: list[Path]) -> None:
    reads = [digest_read(p) for p in files[:2]]
    batch = batch_reads(reads)
    replies = replay(batch.commands)
    assert replies is not None and batch.unpack(replies) is not None
    status, lines = replies[-1]
    swapped = [lines[1], lines[0], *lines[2:]]  # the listing out of order
    assert batch.unpack([*replies[:-1], (status, swapped)]) is None
    digests = lines[5:7]
    shuffled = [*lines[:5], digests[1], digests[0], lines[7]]
    assert batch.unpack([*replies[:-1], (status, shuffled)]) is None


@pytest.mark.parametrize(
    "broken",
    [
        lambda lines: lines[:-1],  # cut off
        lambda lines: [*lines, "extra"],
        lambda lines: [line.replace("##gpufleet-batch 0", "##gpufleet-batch 1") for line in lines],
    ],
)
def test_a_reply_not_as_expected_leaves_the_replay_unread(files: list[Path], broken) -> None:
    reads = [digest_read(p) for p in files[:2]]
    batch = batch_reads(reads)
    replies = replay(batch.commands)
    assert replies is not None
    status, lines = replies[-1]
    assert batch.unpack([*replies[:-1], (status, broken(lines))]) is None
    assert differences(reads, batch.unpack(None)) == [
        "the facts could not be read again in one round trip"
    ]


def test_reads_not_plain_digests_run_as_recorded(files: list[Path]) -> None:
    single = [digest_read(files[0]), other_read("echo x")]
    assert batch_reads(single).commands == [read.command for read in single]
    odd = digest_read(files[1])
    altered = FactRead(odd.fact, odd.command + " ", (0,), odd.value, arguments=odd.arguments)
    batch = batch_reads([digest_read(files[0]), altered, other_read("true")])
    assert batch.commands == [read.command for read in (digest_read(files[0]), altered)] + ["true"]


# --- systemd units: one systemctl show for every SystemdStatus / SystemdEnabled read ---------

SYSTEMD = json.loads((Path(__file__).parents[1] / "fixtures/systemd/show_units.json").read_text())


def unit_read(cls: type, units: list[str]) -> FactRead:
    """A read as the recorder makes it, from the recorded output of its own command."""
    entry = SYSTEMD["single"][f"{cls.state_key} {' '.join(units)}"]  # type: ignore[attr-defined]
    value = digest(cls().process(entry["stdout"]))
    arguments = {"machine": None, "services": units, "user_mode": False, "user_name": None}
    return FactRead(fact_name(cls), entry["command"], (0,), value, arguments=arguments)


def unit_reads() -> list[FactRead]:
    units = SYSTEMD["units"]
    reads = [unit_read(cls, [u]) for u in units for cls in (SystemdStatus, SystemdEnabled)]
    return [*reads, unit_read(SystemdStatus, units[:2])]


def test_every_unit_read_gets_what_its_own_systemctl_printed() -> None:
    reads = unit_reads()
    batch = batch_reads(reads)
    assert batch.commands == [SYSTEMD["merged"]["command"]]  # one systemctl for all 13 reads
    merged = (SYSTEMD["merged"]["status"], SYSTEMD["merged"]["stdout"])
    unpacked = batch.unpack([merged])
    assert unpacked is not None
    for read, reply in zip(reads, unpacked, strict=True):
        cls = SystemdStatus if read.fact.endswith("SystemdStatus") else SystemdEnabled
        own = SYSTEMD["single"][f"{cls.state_key} {' '.join(read.arguments['services'])}"]
        assert reply == (own["status"], own["stdout"])
    assert differences(reads, unpacked) == []


def test_a_unit_that_stopped_reads_differently() -> None:
    reads = unit_reads()
    batch = batch_reads(reads)
    stdout = list(SYSTEMD["merged"]["stdout"])
    stdout[stdout.index("Id=gpufleet-periodic.timer") + 1] = "SubState=dead"
    changed = differences(reads, batch.unpack([(0, stdout)]))
    assert changed == ["pyinfra.facts.systemd:SystemdStatus reads differently"]


def test_no_systemctl_gives_every_read_the_sentinel() -> None:
    reads = unit_reads()
    unpacked = batch_reads(reads).unpack([(0, [MISSING_COMMAND])])
    assert unpacked == [(0, [MISSING_COMMAND])] * len(reads)


@pytest.mark.parametrize(
    "broken",
    [
        lambda lines: lines[:-4],  # a unit's block missing
        lambda lines: [*lines, "", "Id=other.service", "SubState=dead", "UnitFileState="],
        lambda lines: [line.replace("UnitFileState=", "ActiveState=") for line in lines],
        lambda lines: [line for line in lines if line],  # blocks run together
    ],
)
def test_units_output_not_as_expected_leaves_the_replay_unread(broken) -> None:
    batch = batch_reads(unit_reads())
    assert batch.unpack([(0, broken(list(SYSTEMD["merged"]["stdout"])))]) is None
    assert batch.unpack([(1, list(SYSTEMD["merged"]["stdout"]))]) is None


def test_unit_reads_not_as_pyinfra_sends_them_run_as_recorded() -> None:
    plain = unit_read(SystemdStatus, [SYSTEMD["units"][0]])
    user = dataclasses.replace(plain, arguments={**plain.arguments, "user_mode": True})
    edited = dataclasses.replace(unit_read(SystemdEnabled, [SYSTEMD["units"][1]]), command="true")
    batch = batch_reads([plain, user, edited])
    assert batch.commands == [plain.command, user.command, "true"]
