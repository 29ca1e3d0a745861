"""Issue 32 item 7: the GPU probe's arguments, refusals and JSON shape, without TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from validation.workloads import probe

H100 = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559.0}]
TWO = [*H100, {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559.0}]


class FakeRunner:
    """Writes a workload-like document where the child would, and records each call."""

    def __init__(self, code: int | None = 0, write: bool = True) -> None:
        self.calls: list[tuple[list[str], dict[str, str], float]] = []
        self.code, self.write = code, write

    def __call__(self, argv, env, timeout):
        self.calls.append((argv, env, timeout))
        if self.write:
            path = Path(argv[argv.index("--json") + 1])
            path.write_text(json.dumps({"workload": argv[2], "metrics": {"x": 1.0}}))
        return self.code, "a traceback tail"


def _main(tmp_path: Path, *argv: str, runner=None, gpus=H100) -> tuple[int, dict | None]:
    out = tmp_path / "probe.json"
    code = probe.main(["--json", str(out), *argv], runner=runner or FakeRunner(), gpus=lambda: gpus)
    return code, json.loads(out.read_text()) if out.exists() else None


def test_without_a_gpu_it_refuses_clearly_and_writes_nothing(tmp_path, capsys) -> None:
    code, doc = _main(tmp_path, gpus=[])
    assert code == probe.REFUSAL and doc is None
    err = capsys.readouterr().err
    assert "no NVIDIA GPU visible" in err and "--smoke" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--gpu", "3"), "nvidia-smi lists GPU(s) 0, 1"),
        (("--budget-s", "900"), "give 60 to 570 seconds"),
        (("--only", "bert"), "parts are"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_change(tmp_path, capsys, argv, words) -> None:
    code, doc = _main(tmp_path, *argv, gpus=TWO)
    assert code == probe.REFUSAL and doc is None
    assert words in capsys.readouterr().err


def test_a_missing_output_folder_is_refused(tmp_path, capsys) -> None:
    code = probe.main(["--json", str(tmp_path / "no" / "p.json")], FakeRunner(), lambda: H100)
    assert code == probe.REFUSAL and "does not exist" in capsys.readouterr().err


def test_the_document_holds_every_part_on_the_chosen_gpu(tmp_path) -> None:
    runner = FakeRunner(code=1)  # a workload FAIL still wrote its document: data, not a crash
    code, doc = _main(tmp_path, "--gpu", "1", runner=runner, gpus=TWO)
    assert code == 0 and doc is not None
    assert {"probe_version", "mode", "host", "started_at", "duration_s", "budget_s", "gpu"} <= set(
        doc
    )
    assert doc["mode"] == "gpu" and doc["gpu"]["index"] == 1
    assert [p["name"] for p in doc["parts"]] == [p.name for p in probe.PARTS]
    for part in doc["parts"]:
        assert part["status"] == "ran" and part["exit_code"] == 1
        assert part["document"]["metrics"] == {"x": 1.0} and part["settles"]
    assert {env["CUDA_VISIBLE_DEVICES"] for _, env, _ in runner.calls} == {"1"}
    peak = next(argv for argv, _, _ in runner.calls if "validation.workloads._probe_peak" in argv)
    assert peak[-4:-2] == ["--batch", "256"] and "--tiny" not in peak  # N7's own case


def test_the_gpu_run_is_planned_inside_ten_minutes() -> None:
    # Each part's timeout is also capped by what is left (test_parts_past_the_budget...).
    assert sum(p.seconds for p in probe.PARTS) <= probe.BUDGET_S < 600


def test_smoke_mode_runs_cpu_sizes_with_no_gpu_visible(tmp_path) -> None:
    runner = FakeRunner()
    code, doc = _main(tmp_path, "--smoke", runner=runner, gpus=[])
    assert code == 0 and doc is not None and doc["mode"] == "smoke" and doc["gpu"] is None
    for argv, env, _ in runner.calls:
        assert env["CUDA_VISIBLE_DEVICES"] == ""
        assert "--quick" in argv or "--tiny" in argv


def test_timeouts_and_crashes_are_recorded_not_raised(tmp_path) -> None:
    _, doc = _main(tmp_path, "--only", "amp_peak", runner=FakeRunner(code=None, write=False))
    assert doc is not None
    (part,) = doc["parts"]
    assert part["status"] == "timeout" and part["document"] is None
    _, doc = _main(tmp_path, "--only", "grad_accumulation", runner=FakeRunner(1, write=False))
    assert doc is not None
    assert doc["parts"][0]["status"] == "crashed"
    assert doc["parts"][0]["stderr_tail"] == "a traceback tail"


def test_parts_past_the_budget_are_skipped(tmp_path, monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(probe.time, "monotonic", lambda: clock[0])

    def slow(argv, env, timeout):
        assert timeout <= probe.BUDGET_S - clock[0]
        clock[0] += 200.0
        return 0, ""

    _, doc = _main(tmp_path, runner=slow)
    assert doc is not None
    statuses = [p["status"] for p in doc["parts"]]
    assert statuses[:3] == ["crashed"] * 3  # ran, but the fake wrote no document
    assert statuses[3:] == ["skipped"] * (len(probe.PARTS) - 3)


def test_nvidia_smi_rows_are_parsed() -> None:
    text = "0, NVIDIA H100 80GB HBM3, 81559\n1, Tesla T4, [N/A]\nNo devices were found\n"
    assert probe.parse_gpus(text) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559.0},
        {"index": 1, "name": "Tesla T4", "memory_mib": None},
    ]


def test_the_probe_process_never_imports_tensorflow() -> None:
    code = "import sys, validation.workloads.probe; print('tensorflow' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
