"""A resumed host is done only once the scheduler gives it jobs again (Slurm's `idle*`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpufleet.rollout import machine
from gpufleet.scheduler.slurm import Slurm
from tests.unit.test_rollout import FakeScheduler, rollout
from tests.unit.test_scheduler_rule import FakeSlurm


class SlowSlurmd(FakeScheduler):
    """A resumed host shows `idle*` (no answer yet) for `polls` of out_of_service, as a
    rebooted node does until its slurmd registers; it counts against the limit meanwhile."""

    def __init__(self, limit: int, polls: int) -> None:
        super().__init__(limit)
        self.polls = polls
        self.silent: dict[str, int] = {}

    def out_of_service(self, names: Sequence[str] = ()) -> dict[str, str]:
        out = dict(self.drained)
        for name in list(self.silent):
            out[name] = "idle*"
            self.silent[name] -= 1
            if self.silent[name] <= 0:
                del self.silent[name]
        return out

    def drain(self, name: str, reason: str) -> None:
        others = sorted(set(self.silent) - {name})
        assert not others, f"{name} drained while {others} does not answer"
        super().drain(name, reason)

    def resume(self, name: str) -> None:
        super().resume(name)
        self.silent[name] = self.polls
        self.events.append(f"answering {name}")


def test_the_next_host_starts_only_after_the_resumed_one_answers(tmp_path: Path) -> None:
    sched = SlowSlurmd(limit=1, polls=3)
    result = rollout(tmp_path, sched).run()
    assert {r.state for r in result.hosts.values()} == {"done"}
    assert sched.drained == {} and not sched.silent
    # without the wait, h2's drain would come while h1 is still idle* (two out at once)
    assert sched.events.index("drain h2") > sched.events.index("answering h1")


def test_a_host_that_never_answers_after_its_resume_fails_drained(tmp_path: Path) -> None:
    sched = SlowSlurmd(limit=1, polls=10**6)
    run = rollout(tmp_path, sched, ("h1", "h2"))
    ticks = iter(range(0, 10**6, 60))
    run.clock = lambda: float(next(ticks))
    result = run.run()
    record = result.hosts["h1"]
    assert record.state == "failed"
    assert "resume failed: not back in service 300 s after its resume (idle*)" in record.reason
    assert sched.drained["h1"] == record.reason  # drained again, with the reason
    assert result.hosts["h2"].state == "pending"
    assert "--max-failures 1 reached" in result.stopped_because


def test_slurm_resume_leaves_a_node_in_service_alone() -> None:
    """A rollout restarted after its resume asks again; scontrol would refuse an idle node."""
    fake = FakeSlurm("gfsb-h1|idle|none\ngfsb-h2|drained|gpufleet: rollout: upgrading\n")
    Slurm(fake).resume("gfsb-h1")
    assert all(call[0] != "scontrol" for call in fake.calls)
    Slurm(fake).resume("gfsb-h2")
    assert fake.calls[-1] == ["scontrol", "update", "NodeName=gfsb-h2", "State=RESUME"]


def test_out_of_service_shows_a_silent_node_as_sinfo_does() -> None:
    fake = FakeSlurm("gfsb-h1|idle*|none\ngfsb-h2|idle|none\ngfsb-h3|mixed+drain|operator: x\n")
    assert Slurm(fake).out_of_service() == {"gfsb-h1": "idle*", "gfsb-h3": "operator: x"}
    assert machine.RESUME_WAIT_S == 300.0
