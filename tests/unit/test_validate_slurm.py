"""`gpufleet validate --scheduler slurm`: busy hosts keep their jobs; results drain and resume."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpufleet.inventory import InventoryHost
from gpufleet.report.schema import validate_results
from gpufleet.scheduler import validate_hook as hook
from tests.unit import fleet_factory as ff
from tests.unit.test_scheduler_rule import FakeSlurm


def check(name: str, status: str, message: str = "") -> dict[str, Any]:
    return {"name": name, "status": status, "message": message, "figures": {}, "duration_s": 0.1}


def document(*checks: dict[str, Any]) -> dict[str, Any]:
    return ff.checks_document(list(checks), host="gfsb-h1", run_id="r1")


HOST = InventoryHost("gfsb-h1", "ssh", "10.231.7.11")


def gate(sinfo: str, jobs: str = "") -> tuple[hook.SlurmValidate, FakeSlurm, list[str]]:
    fake = FakeSlurm(sinfo)
    original = fake.__call__

    def answer(argv: Any) -> tuple[int, str]:
        if argv[0] == "squeue":
            fake.calls.append(list(argv))
            return 0, jobs
        return original(argv)

    lines: list[str] = []
    return hook.SlurmValidate(Path("/nonexistent"), lambda _h: answer, lines.append), fake, lines


def test_a_busy_host_runs_no_workload_and_is_inconclusive_not_failed() -> None:
    slurm, fake, _lines = gate("gfsb-h1|mixed|none", jobs="17\n18\n")
    run = SimpleNamespace(host=HOST, alias="a0", document=None)
    assert slurm.before([run], None) == {"a0": "not test_workloads"}
    assert slurm.before([run], "host_state") == {"a0": "(host_state) and not test_workloads"}
    run.document = document(check("host_state::nouveau_not_loaded", "pass"))
    slurm.after([run])
    validate_results(run.document)  # still a valid results document
    busy = run.document["checks"][-1]
    assert busy["name"] == hook.BUSY_CHECK and busy["status"] == "inconclusive"
    assert "17, 18" in busy["message"] and "keeps its jobs" in busy["message"]
    assert run.document["status"] == "unproven"
    assert not any(c[0] == "scontrol" for c in fake.calls)  # unproven: nothing decided


def test_a_failing_run_drains_with_the_failing_check() -> None:
    slurm, fake, lines = gate("gfsb-h1|idle|none")
    run = SimpleNamespace(host=HOST, alias="a0", document=None)
    slurm.before([run], None)
    run.document = document(
        check("host_state::nouveau_not_loaded", "pass"),
        check("host_state::persistence_mode", "fail", "persistence mode is off on GPU(s) 0"),
    )
    slurm.after([run])
    assert fake.calls[-1][-1] == (
        "Reason=gpufleet: host_state::persistence_mode: persistence mode is off on GPU(s) 0"
    )
    assert lines[-1].startswith("slurm: drain gfsb-h1")


def test_a_passing_run_resumes_only_gpufleets_drain() -> None:
    for reason, resumed in (
        ("gpufleet: host_state::nouveau_not_loaded: nouveau is loaded", True),
        ("gpufleet: xid: Xid 79", False),  # the health check's drain: xid did not run here
        ("operator: RMA", False),
    ):
        slurm, fake, _ = gate(f"gfsb-h1|drained|{reason}")
        run = SimpleNamespace(host=HOST, alias="a0", document=None)
        slurm.before([run], None)
        run.document = document(check("host_state::nouveau_not_loaded", "pass"))
        slurm.after([run])
        did = fake.calls[-1] == ["scontrol", "update", "NodeName=gfsb-h1", "State=RESUME"]
        assert did is resumed, reason


def test_slurm_unreachable_is_said_and_the_host_runs_no_workload() -> None:
    """Review finding 16: a Slurm that cannot be asked was taken as "no jobs" (the speed
    workloads ran beside whatever jobs the host had); its jobs are unknown, as on a busy host."""

    def broken(_argv: Any) -> tuple[int, str]:
        return 1, "slurm_load_jobs error: Unable to contact slurm controller"

    lines: list[str] = []
    slurm = hook.SlurmValidate(Path("/nonexistent"), lambda _h: broken, lines.append)
    run = SimpleNamespace(host=HOST, alias="a0", document=None)
    assert slurm.before([run], None) == {"a0": "not test_workloads"}
    assert "Unable to contact" in lines[0] and "no speed workload" in lines[0]
    run.document = document(check("host_state::x", "pass"))
    slurm.after([run])
    validate_results(run.document)
    unknown = run.document["checks"][-1]
    assert unknown["name"] == hook.UNKNOWN_CHECK and unknown["status"] == "inconclusive"
    assert "jobs are unknown" in unknown["message"] and run.document["status"] == "unproven"
    assert "neither drained nor resumed" in lines[-1]


def test_the_selection_leaves_out_exactly_the_speed_workloads() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    def collected(*k: str) -> list[str]:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                *k,
                "validation",
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return [line for line in proc.stdout.splitlines() if "::" in line]

    everything, busy = collected(), collected("-k", hook.NO_WORKLOADS)
    left_out = sorted(set(everything) - set(busy))
    assert left_out and all(t.startswith("validation/test_workloads.py::") for t in left_out)
