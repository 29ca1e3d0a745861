"""The rollout state machine with a fake scheduler and fake deploy/reboot/validate steps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufleet.rollout import machine
from gpufleet.rollout import state as st
from gpufleet.scheduler.none import NoScheduler
from gpufleet.scheduler.rule import SchedulerError


class FakeScheduler:
    """Drains and jobs in memory; fails the test the moment too many hosts are out at once."""

    name = "fake"

    def __init__(self, limit: int, others: dict[str, str] | None = None) -> None:
        self.limit = limit
        self.drained: dict[str, str] = dict(others or {})
        self.jobs: dict[str, list[str]] = {}
        self.events: list[str] = []
        self.peak = 0

    def out_of_service(self, names: Sequence[str] = ()) -> dict[str, str]:
        return dict(self.drained)

    def drain(self, name: str, reason: str) -> None:
        self.drained[name] = reason
        self.peak = max(self.peak, len(self.drained))
        assert len(self.drained) <= self.limit, f"{sorted(self.drained)} out at once"
        self.events.append(f"drain {name}")

    def resume(self, name: str) -> None:
        self.drained.pop(name, None)
        self.events.append(f"resume {name}")

    def running_jobs(self, name: str) -> list[str]:
        jobs = self.jobs.get(name, [])
        if jobs:
            self.events.append(f"job on {name}")
            jobs.pop()  # the job ends after one more poll
            return ["42"]
        return []


def ok(events: list[str], step: str, fail: set[str] | None = None):
    def call(host: str) -> tuple[bool, str]:
        events.append(f"{step} {host}")
        if fail and host in fail:
            return False, f"{step} check failed on {host}"
        return True, ""

    return call


def rollout(
    tmp_path: Path,
    sched: FakeScheduler,
    hosts: Sequence[str] = ("h1", "h2", "h3"),
    *,
    fail_validate: set[str] | None = None,
    options: machine.Options | None = None,
    state: st.RolloutState | None = None,
) -> machine.Rollout:
    steps = machine.Steps(
        ok(sched.events, "deploy"),
        ok(sched.events, "reboot"),
        ok(sched.events, "validate", fail_validate),
    )
    state = state or st.RolloutState({h: st.HostRecord(h) for h in hosts})
    return machine.Rollout(
        state,
        sched,
        steps,
        options or machine.Options(max_unavailable=sched.limit),
        state_path=tmp_path / "rollout.json",
        textfile=tmp_path / "rollout.prom",
        log=lambda _line: None,
        sleep=lambda _s: None,
    )


def test_every_host_goes_through_every_state_one_at_a_time(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)
    result = rollout(tmp_path, sched).run()
    assert {r.state for r in result.hosts.values()} == {"done"}
    assert sched.peak == 1 and sched.drained == {}
    assert [s for _, s in result.hosts["h2"].history] == list(st.STEPS[1:])
    assert sched.events[:6] == [
        "drain h1",
        "deploy h1",
        "reboot h1",
        "validate h1",
        "resume h1",
        "drain h2",
    ]
    saved = json.loads((tmp_path / "rollout.json").read_text())
    assert [h["state"] for h in saved["hosts"]] == ["done"] * 3
    assert 'gpufleet_rollout_hosts{state="done"} 3' in (tmp_path / "rollout.prom").read_text()


def test_max_unavailable_two_runs_two_at_once(tmp_path: Path) -> None:
    import threading

    sched = FakeScheduler(limit=2)
    both = threading.Barrier(2, timeout=10)  # each batch's two hosts deploy side by side
    run = rollout(tmp_path, sched, ("h1", "h2", "h3", "h4"))
    deploy = run.steps.deploy

    def together(host: str) -> tuple[bool, str]:
        both.wait()
        return deploy(host)

    run.steps.deploy = together
    result = run.run()
    assert sched.peak == 2 and {r.state for r in result.hosts.values()} == {"done"}


def test_hosts_drained_by_others_count_against_max_unavailable(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=2, others={"x9": "operator: bad fan"})
    result = rollout(tmp_path, sched).run()
    assert sched.peak == 2 and {r.state for r in result.hosts.values()} == {"done"}


def test_a_running_job_delays_the_deploy_until_it_ends(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)
    sched.jobs["h1"] = ["a", "b"]
    rollout(tmp_path, sched, ("h1",)).run()
    assert sched.events == [
        "drain h1",
        "job on h1",
        "job on h1",
        "deploy h1",
        "reboot h1",
        "validate h1",
        "resume h1",
    ]


def test_jobs_outliving_wait_for_jobs_skip_the_host_and_return_it(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)
    sched.jobs["h1"] = ["a"] * 100
    options = machine.Options(max_unavailable=1, wait_for_jobs_s=0)
    result = rollout(tmp_path, sched, ("h1", "h2"), options=options).run()
    assert result.hosts["h1"].state == "skipped" and "--wait-for-jobs" in result.hosts["h1"].reason
    assert "deploy h1" not in sched.events and "resume h1" in sched.events
    assert result.hosts["h2"].state == "done"


def test_failed_validation_stays_drained_and_stops_at_max_failures(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)
    result = rollout(tmp_path, sched, fail_validate={"h2"}).run()
    states = {name: r.state for name, r in result.hosts.items()}
    assert states == {"h1": "done", "h2": "failed", "h3": "pending"}
    assert sched.drained["h2"].startswith("gpufleet: rollout: validation failed: validate check")
    assert result.hosts["h2"].reason == sched.drained["h2"]
    assert "resume h2" not in sched.events
    assert "--max-failures 1 reached" in result.stopped_because


def test_max_failures_two_goes_on_but_a_drained_failure_holds_its_slot(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=2)
    options = machine.Options(max_unavailable=2, max_failures=2)
    result = rollout(
        tmp_path, sched, ("h1", "h2", "h3", "h4"), fail_validate={"h1"}, options=options
    ).run()
    assert result.hosts["h1"].state == "failed"
    assert all(result.hosts[h].state == "done" for h in ("h2", "h3", "h4"))
    assert sched.peak == 2


def test_hosts_drained_by_someone_else_are_skipped_unless_named(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=2, others={"h2": "operator: bad fan"})
    result = rollout(tmp_path, sched).run()
    assert result.hosts["h2"].state == "skipped" and "bad fan" in result.hosts["h2"].reason
    assert sched.drained == {"h2": "operator: bad fan"}
    sched = FakeScheduler(limit=2, others={"h2": "operator: bad fan"})
    named = machine.Options(max_unavailable=2, named=frozenset({"h2"}))
    result = rollout(tmp_path, sched, options=named).run()
    assert result.hosts["h2"].state == "done"


class Killed(BaseException):
    """What SIGKILL looks like to the code that was running: it simply stops."""


def test_a_rollout_killed_mid_deploy_finishes_when_started_again(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)
    first = rollout(tmp_path, sched)
    real_deploy = first.steps.deploy

    def dies_on_h2(host: str) -> tuple[bool, str]:
        if host == "h2":
            raise Killed
        return real_deploy(host)

    first.steps.deploy = dies_on_h2
    with pytest.raises(Killed):
        first.run()
    saved = st.load(tmp_path / "rollout.json")
    assert saved is not None
    assert {n: r.state for n, r in saved.hosts.items()} == {
        "h1": "done",
        "h2": "deploying",
        "h3": "pending",
    }
    # every host the scheduler has drained carries a recorded reason in the state file
    assert all(saved.hosts[name].reason for name in sched.drained)
    second = rollout(tmp_path, sched, state=saved).run()
    assert {r.state for r in second.hosts.values()} == {"done"}
    assert sched.drained == {} and sched.events.count("deploy h2") == 1


def test_a_kill_between_drain_record_and_drain_is_safe(tmp_path: Path) -> None:
    saved = st.RolloutState({"h1": st.HostRecord("h1", "draining", "gpufleet: rollout: upgrading")})
    sched = FakeScheduler(limit=1)
    result = rollout(tmp_path, sched, state=saved).run()
    assert result.hosts["h1"].state == "done" and sched.events[0] == "drain h1"


def test_scheduler_errors_fail_the_host_not_the_rollout(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=1)

    def broken(name: str, reason: str) -> None:
        raise SchedulerError("scontrol: Unable to contact slurm controller")

    sched.drain = broken  # type: ignore[method-assign]
    result = rollout(tmp_path, sched, ("h1",)).run()
    assert result.hosts["h1"].state == "failed"
    assert "Unable to contact" in result.hosts["h1"].reason


def test_dry_plan_shows_batches_and_skips(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=2, others={"h3": "operator: bad fan"})
    state = st.RolloutState({h: st.HostRecord(h) for h in ("h1", "h2", "h3", "h4", "h5")})
    lines = machine.plan(state, sched, machine.Options(max_unavailable=2))
    assert lines == [
        "h3: skipped: out of service already (operator: bad fan)",
        "batch 1: h1",
        "batch 2: h2",
        "batch 3: h4",
        "batch 4: h5",
    ]


@pytest.mark.parametrize(
    ("text", "hosts", "want"), [("1", 3, 1), ("25%", 10, 3), ("50%", 3, 2), ("1%", 3, 1)]
)
def test_max_unavailable_counts_and_percentages(text: str, hosts: int, want: int) -> None:
    assert machine.parse_max_unavailable(text, hosts) == want


@pytest.mark.parametrize("text", ["0", "-1", "x", "0%", "150%"])
def test_bad_max_unavailable_is_refused(text: str) -> None:
    with pytest.raises(st.RolloutError):
        machine.parse_max_unavailable(text, 3)


def test_no_scheduler_runs_the_operators_commands_without_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "cordoned"
    sched = NoScheduler(f"touch {marker}-{{host}}", f"rm {marker}-{{host}}")
    sched.drain("gpu-1", "gpufleet: rollout: upgrading")
    assert (tmp_path / "cordoned-gpu-1").exists()
    sched.resume("gpu-1")
    assert not (tmp_path / "cordoned-gpu-1").exists()
    with pytest.raises(SchedulerError, match="exited"):
        NoScheduler("false").drain("gpu-1", "r")
    with pytest.raises(SchedulerError):
        NoScheduler("touch {host}").drain("$(reboot)", "r")


def test_real_steps_run_pyinfra_and_validate_for_one_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufleet.rollout import steps as real

    record = tmp_path / "argv"
    fake = tmp_path / "fake-python"
    fake.write_text(
        f'#!/bin/sh\nprintf "%s " "$@" >> {record}; echo >> {record}\n'
        'case "$*" in *bad-host*) echo "host failed: driver mismatch"; exit 1;; esac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(real.sys, "executable", str(fake))
    got = real.real_steps(
        "inv.py",
        "deploy/gpu_node.py",
        tier="quick",
        results_dir=tmp_path / "r",
        log_dir=tmp_path / "logs",
        data=["driver_branch=580"],
        select="host_state",
    )
    assert got.deploy("gpu-1") == (True, "")
    assert got.reboot("gpu-1") == (True, "")
    assert got.validate("gpu-1") == (True, "")
    lines = record.read_text().splitlines()
    assert lines[0].split() == [
        "-m",
        "pyinfra",
        "-y",
        "inv.py",
        "deploy/gpu_node.py",
        "--limit",
        "gpu-1",
        "--data",
        "driver_branch=580",
    ]
    assert lines[1].split() == [
        "-m",
        "pyinfra",
        "-y",
        "inv.py",
        "server.reboot",
        "--limit",
        "gpu-1",
    ]
    assert lines[2].split()[:5] == ["-m", "gpufleet.cli", "validate", "inv.py", "--limit"]
    assert lines[2].split()[-2:] == ["--select", "host_state"]
    ok_, message = got.validate("bad-host")
    assert not ok_ and "exit 1" in message and "driver mismatch" in message
    with pytest.raises(SchedulerError):
        got.deploy("$(reboot)")


def test_a_host_out_of_service_for_a_while_is_waited_for_not_a_stop(tmp_path: Path) -> None:
    """After the controller's own reboot its nodes answer again a few seconds later."""
    sched = FakeScheduler(limit=2, others={"h1": "not responding"})
    run = rollout(tmp_path, sched, ("h2", "h3"), options=machine.Options(max_unavailable=1))
    polls = []

    def sleep(_s: float) -> None:
        polls.append(1)
        if len(polls) == 3:
            sched.drained.pop("h1")  # it registers again

    run.sleep = sleep
    result = run.run()
    assert {r.state for r in result.hosts.values()} == {"done"} and len(polls) >= 3


def test_a_slot_that_never_frees_stops_the_rollout_with_the_reason(tmp_path: Path) -> None:
    sched = FakeScheduler(limit=2, others={"x9": "operator: bad fan"})
    clock = iter(range(0, 100000, 100))
    run = rollout(tmp_path, sched, ("h2",), options=machine.Options(max_unavailable=1))
    run.clock = lambda: float(next(clock))
    result = run.run()
    assert result.hosts["h2"].state == "pending"
    assert "--max-unavailable 1: no host can start" in result.stopped_because
