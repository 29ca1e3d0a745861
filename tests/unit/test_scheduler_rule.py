"""The Slurm drain/resume rule, its reasons, sinfo parsing and the adapter's commands."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufleet.scheduler.rule import (
    MAX_REASON,
    NodeState,
    SchedulerError,
    check_node_name,
    decide,
    drained_for,
    parse_sinfo,
    parse_state_word,
    reason_text,
)
from gpufleet.scheduler.slurm import Slurm

# sinfo -h -N -o '%N|%T|%E' as Slurm 21.08 prints it (the sandbox cluster)
SINFO = """gfsb-h1|idle|none
gfsb-h2|drained|gpufleet: persistence: nvidia-persistenced is inactive, expected active
gfsb-h3|draining|maintenance by alice | ticket 42
gfsb-h4|down*|Not responding
gfsb-h5|mixed|none
"""


def test_parse_sinfo_reads_states_flags_and_reasons_with_bars() -> None:
    nodes = parse_sinfo(SINFO)
    assert nodes["gfsb-h1"] == NodeState("gfsb-h1", "idle", frozenset(), "")
    assert nodes["gfsb-h2"].drained and nodes["gfsb-h2"].ours
    assert nodes["gfsb-h3"].reason == "maintenance by alice | ticket 42"
    assert nodes["gfsb-h3"].drained and not nodes["gfsb-h3"].ours and nodes["gfsb-h3"].busy
    assert not nodes["gfsb-h4"].responding and nodes["gfsb-h4"].out_of_service
    assert nodes["gfsb-h5"].busy and not nodes["gfsb-h5"].out_of_service


def test_state_words_with_suffixes_and_plus_flags() -> None:
    assert parse_state_word("drained*") == ("drained", frozenset({"*"}))
    assert parse_state_word("IDLE+DRAIN") == ("idle", frozenset({"drain"}))
    assert NodeState("n", "idle", frozenset({"drain"})).drained


def test_reason_is_one_plain_line_without_quotes_and_bounded() -> None:
    text = reason_text("xid", 'Xid 79 "fell off"\nthe bus\t$(reboot) `id` \\ x')
    assert text.startswith("gpufleet: xid: Xid 79 'fell off' the bus $(reboot)")
    assert '"' not in text and "\n" not in text and "\\" not in text
    assert len(reason_text("c", "m" * 1000)) == MAX_REASON


FAIL = ("persistence", "nvidia-persistenced is inactive, expected active")


@pytest.mark.parametrize(
    ("line", "failure", "kind"),
    [
        ("n|idle|none", FAIL, "drain"),
        ("n|mixed|none", FAIL, "drain"),  # drain lets running jobs finish
        (
            "n|drained|gpufleet: persistence: nvidia-persistenced is inactive, expected active",
            FAIL,
            "none",
        ),
        ("n|drained|gpufleet: xid: Xid 79", FAIL, "drain"),  # our reason, updated
        ("n|drained|operator: bad fan", FAIL, "none"),  # someone else's reason is kept
        ("n|down*|Not responding", FAIL, "none"),
        ("n|drained|gpufleet: xid: Xid 79", None, "resume"),
        ("n|draining|gpufleet: xid: Xid 79", None, "resume"),
        ("n|drained|operator: bad fan", None, "none"),  # drained by hand: left alone
        ("n|drained|GPUFLEET-ish but not ours", None, "none"),
        # a rollout's drain is the rollout's to lift
        ("n|drained|gpufleet: rollout: upgrading", None, "none"),
        ("n|drained|gpufleet: rollout: upgrading", FAIL, "none"),
        ("n|idle|none", None, "none"),
    ],
)
def test_decide_drains_failures_and_resumes_only_its_own(
    line: str, failure: tuple[str, str] | None, kind: str
) -> None:
    action = decide(parse_sinfo(line)["n"], failure)
    assert action.kind == kind, action.why
    if kind == "drain":
        assert action.reason.startswith("gpufleet: ")


def test_node_names_are_checked() -> None:
    assert check_node_name("gpu-07.rack3") == "gpu-07.rack3"
    for bad in ("", "-x", "a b", "a;reboot", "a,b", "$(id)"):
        with pytest.raises(SchedulerError):
            check_node_name(bad)


class FakeSlurm:
    """A stand-in for sinfo/scontrol: records every argv, answers sinfo from a table."""

    def __init__(self, sinfo: str) -> None:
        self.sinfo = sinfo
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if argv[0] == "sinfo":
            wanted = argv[argv.index("-n") + 1].split(",") if "-n" in argv else None
            lines = [x for x in self.sinfo.splitlines() if not wanted or x.split("|")[0] in wanted]
            return 0, "\n".join(lines) + "\n"
        return 0, ""


def test_adapter_drains_with_the_reason_as_one_argument() -> None:
    fake = FakeSlurm(SINFO)
    action = Slurm(fake).apply("gfsb-h1", ("xid", "Xid 79 on 0000:17:00.0"))
    assert action.kind == "drain"
    assert fake.calls[-1] == [
        "scontrol",
        "update",
        "NodeName=gfsb-h1",
        "State=DRAIN",
        "Reason=gpufleet: xid: Xid 79 on 0000:17:00.0",
    ]


def test_adapter_resumes_ours_and_leaves_a_hand_drain() -> None:
    fake = FakeSlurm(SINFO)
    assert Slurm(fake).apply("gfsb-h2", None).kind == "resume"
    assert fake.calls[-1] == ["scontrol", "update", "NodeName=gfsb-h2", "State=RESUME"]
    fake.calls.clear()
    assert Slurm(fake).apply("gfsb-h3", None).kind == "none"
    assert all(call[0] != "scontrol" for call in fake.calls)


def test_adapter_refuses_an_unknown_node() -> None:
    with pytest.raises(SchedulerError, match="no node"):
        Slurm(FakeSlurm(SINFO)).node("gfsb-h9")


def test_a_hostile_reason_reaches_a_real_shell_as_one_argument(tmp_path: Path) -> None:
    """What the SSH runner does (shlex.join under sh -c), with a recording scontrol."""
    record, canary = tmp_path / "argv", tmp_path / "pwned"
    fake = tmp_path / "scontrol"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {record}\n')
    fake.chmod(0o755)

    def shell_runner(argv: Sequence[str]) -> tuple[int, str]:
        command = shlex.join([str(fake) if argv[0] == "scontrol" else argv[0], *argv[1:]])
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
        return proc.returncode, proc.stdout

    hostile = f"x'; touch {canary}; echo '$(touch {canary})`touch {canary}`\"; touch {canary}"
    reason = reason_text("xid", hostile)
    Slurm(shell_runner).drain("gfsb-h1", reason)
    assert not canary.exists()
    assert record.read_text().splitlines() == [
        "update",
        "NodeName=gfsb-h1",
        "State=DRAIN",
        f"Reason={reason}",
    ]


@pytest.mark.parametrize(
    ("reason", "passed", "want"),
    [
        ("gpufleet: persistence: nvidia-persistenced is inactive", {"persistence"}, "resume"),
        ("gpufleet: persistence: nvidia-persistenced is inactive", {"xid", "ecc"}, "none"),
        ("gpufleet: host_state::blacklist: cleared", {"host_state::blacklist"}, "resume"),
        ("gpufleet: host_state::blacklist: cleared", {"persistence"}, "none"),
        ("gpufleet: rollout: upgrading", {"rollout"}, "none"),
        ("operator: bad fan", {"operator"}, "none"),
    ],
)
def test_only_the_check_that_drained_a_node_can_resume_it(
    reason: str, passed: set[str], want: str
) -> None:
    """The health check (persistence, xid, ...) must not undo validate's drain, nor the reverse."""
    node = NodeState("n", "drained", reason=reason)
    action = decide(node, None, passed)
    assert action.kind == want, action.why
    assert drained_for("gpufleet: host_state::x[a:b]: slow: 3 s") == "host_state::x[a:b]"
