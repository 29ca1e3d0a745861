"""The time budget's process plan: the quick tier is ONE TensorFlow process per host.

The suite's test_workload runs against a stand-in host that records every command and answers
with recorded workload documents (tests/fixtures/results/workloads/), so the plan is counted
as the suite really runs it (docs/explanation/time-budget.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from validation import test_workloads as suite
from validation.host.gpu_selection import DOC_SEPARATOR
from validation.verdicts.runstate import RunState
from validation.verdicts.tiers import BUNDLED, FULL_WORKLOADS, PROCESSES, QUICK_WORKLOADS
from validation.workloads import bundle

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "workloads"


class Host:
    """Records commands; a bundle prints the recorded documents of the workloads it names
    (those in ``missing`` print nothing, as after a crash), a workload its own."""

    def __init__(self, missing: tuple[str, ...] = (), rc: int = 0) -> None:
        self.commands: list[str] = []
        self.missing, self.rc = missing, rc

    def run(self, command: str) -> SimpleNamespace:
        self.commands.append(command)
        if "validation.workloads.bundle" in command:
            names = command.split("--workloads ")[1].split()[0].strip("'").split(",")
            out = "".join(
                ("" if n in self.missing else (RECORDED / f"{n}.json").read_text())
                + f"\n{DOC_SEPARATOR}\n"
                for n in names
            )
            return SimpleNamespace(stdout=out, stderr="step=import\nSegmentation fault", rc=self.rc)
        name = command.split("validation.workloads.")[1].split()[0]
        recorded = RECORDED / f"{name}.json"
        text = recorded.read_text() if recorded.exists() else json.dumps(_minimal(name))
        if DOC_SEPARATOR in command:  # one pinned process per GPU at once (parallel_command)
            text = "".join(f"{text}\n{DOC_SEPARATOR}\n" for _ in range(command.count(" -m ")))
        return SimpleNamespace(stdout=text, stderr="", rc=0)


def _minimal(name: str) -> dict[str, Any]:
    return {"workload": name, "checks": [], "verdict": {"status": "not_applicable", "reason": "x"}}


def _run_tier(tier: str, host: Host, gpus: int, *, skips: tuple[str, ...] = ()) -> RunState:
    """Each workload of ``tier`` as the suite runs it; a workload the suite skips or marks
    xfail must be one of ``skips`` (the command counts below say nothing about those)."""
    expectations: Any = SimpleNamespace(calibration=None)
    state = RunState(expectations=expectations, tier=tier, run_id="r", started_at="t")
    skipped = []
    for workload in QUICK_WORKLOADS if tier == "quick" else FULL_WORKLOADS:
        try:
            suite.test_workload(
                host=host,
                workload=workload,
                env_python="/opt/env/bin/python",
                payload_dir="/opt/gpufleet/validation/current",
                spec=SimpleNamespace(thresholds={}),
                tier=tier,
                info=SimpleNamespace(gpus_on_bus=[object()] * gpus),
                run_state=state,
                record=lambda *a, **k: None,
                expectations=state.expectations,
            )
        except (pytest.skip.Exception, pytest.xfail.Exception):
            skipped.append(workload)
    assert tuple(skipped) == skips, skipped
    return state


def test_the_quick_tier_starts_one_process_on_an_8_gpu_host() -> None:
    host = Host()
    state = _run_tier("quick", host, gpus=8)
    assert len(host.commands) == 1
    assert "-m validation.workloads.bundle" in host.commands[0]
    assert "--workloads resnet50,mirrored,gemm" in host.commands[0]
    assert "--quick" in host.commands[0]
    assert [d["workload"] for d in state.workloads] == list(QUICK_WORKLOADS)
    resnet = state.workloads[0]
    assert resnet["config"]["gpu_under_test"] == "0"  # the single-GPU one, on GPU 0
    assert all(d["processes"] == 1 for d in state.workloads[1:])


def test_a_workload_the_bundle_wrote_no_document_for_fails_with_the_exit_status() -> None:
    host = Host(missing=("gemm",), rc=139)
    with pytest.raises(pytest.fail.Exception, match=r"gemm: .*wrote no document.*exit 139"):
        _run_tier("quick", host, gpus=8)
    assert len(host.commands) == 1  # the others took theirs from the same process
    assert [d["workload"] for d in _run_tier("quick", Host(), gpus=0).workloads] == list(
        QUICK_WORKLOADS
    )


def test_the_full_tier_runs_each_workload_in_its_processes_only() -> None:
    host = Host()
    # No recorded document for these four: the stand-in's minimal one is "not applicable",
    # which the suite reports as a skip, after their processes ran.
    not_applicable = ("input_pipeline", "memory_growth", "allreduce", "grad_accumulation")
    _run_tier("full", host, gpus=8, skips=not_applicable)
    per_gpu_parallel = 1  # resnet50: one command starting 8 pinned processes at once
    # Nothing undecided in these documents: one process each, however many the budget allows.
    assert PROCESSES["full"] > 1
    assert len(host.commands) == (len(FULL_WORKLOADS) - 1) + per_gpu_parallel
    assert not any("validation.workloads.bundle" in c for c in host.commands)


def test_bundled_workloads_can_share_one_process() -> None:
    assert set(BUNDLED["quick"]) <= set(bundle.BUNDLEABLE)
    assert bundle.workload_names("gemm,resnet50") == ["gemm", "resnet50"]
    for wrong in ("allreduce", "memory_growth,gemm", "gemm,gemm", ""):
        with pytest.raises(ValueError, match="at most once"):
            bundle.workload_names(wrong)


def test_a_single_gpu_workload_in_the_bundle_gets_the_first_gpu_only() -> None:
    args = SimpleNamespace(quick=True)
    devices = [{"type": "GPU", "name": f"/device:GPU:{i}"} for i in range(8)]
    host = bundle.Run(workload="bundle", args=args, gpus=[d["name"] for d in devices])  # type: ignore[arg-type]
    host.devices, host.gpu_model, host.compute_capability = devices, "NVIDIA A100-SXM4-80GB", (8, 0)
    single = bundle.Run(workload="resnet50", args=args)  # type: ignore[arg-type]
    bundle.adopt_devices(single, host, "resnet50")
    assert single.gpus == ["/device:GPU:0"] and len(single.devices) == 1
    every = bundle.Run(workload="mirrored", args=args)  # type: ignore[arg-type]
    bundle.adopt_devices(every, host, "mirrored")
    assert len(every.gpus) == 8 and every.gpu_model == "NVIDIA A100-SXM4-80GB"
    assert every.compute_capability == (8, 0)
