"""Single-GPU workloads pinned to the GPU under test: which GPUs, the shell command, the merge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from validation.host.gpu_selection import (
    SelectionError,
    combine_gpus,
    gpus_under_test,
    parallel_command,
    split_documents,
    visible_env,
)
from validation.test_workloads import workload_command

PROBE = (
    "import json, os, sys\n"
    "path = sys.argv[sys.argv.index('--json') + 1]\n"
    "env = {k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER')}\n"
    "json.dump({'env': env, 'argv': sys.argv[1:]}, open(path, 'w'))\n"
)


def test_quick_pins_one_gpu_full_loops_and_multi_gpu_workloads_see_all() -> None:
    assert gpus_under_test("mixed_precision", "quick", 8) == ["0"]
    assert gpus_under_test("resnet50", "full", 3) == ["0", "1", "2"]
    assert gpus_under_test("resnet50", "quick", 8) == ["0"]
    # Feature workloads run on GPU 0 in both tiers (the full tier's time budget).
    assert gpus_under_test("xla", "full", 3) == ["0"]
    assert gpus_under_test("bert_large", "full", 8) == ["0"]
    assert gpus_under_test("mirrored", "quick", 8) == [None]
    assert gpus_under_test("gemm", "full", 8) == [None]  # every GPU at once, by design
    assert gpus_under_test("xla", "quick", 0) == [None]  # GPU-less host: CPU run


def test_only_ordinals_reach_the_environment() -> None:
    assert visible_env("3") == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "3"}
    assert visible_env(None) == {}
    with pytest.raises(SelectionError):
        visible_env("0; reboot")


def test_the_command_pins_the_gpu_and_quotes_every_value(tmp_path: Path) -> None:
    """A real shell runs the suite's command against a stand-in workload module."""
    package = tmp_path / "payload dir" / "validation" / "workloads"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(PROBE)
    nasty = "'; touch pwned; echo $(id) `id`"
    command = workload_command(
        "probe",
        python=sys.executable,
        payload_dir=str(tmp_path / "payload dir"),
        quick=True,
        thresholds={"note": nasty},
        timeout_s=60,
        gpu="5",
        extra={"--nccl-tests": json.dumps({"busbw_gbps": 1.0, "gpus": 2, "source": nasty})},
    )
    done = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["env"] == {"CUDA_VISIBLE_DEVICES": "5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    argv = doc["argv"]
    assert json.loads(argv[argv.index("--thresholds") + 1]) == {"note": nasty}
    assert json.loads(argv[argv.index("--nccl-tests") + 1])["source"] == nasty
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "payload dir" / "pwned").exists()
    unpinned = workload_command(
        "probe", python="python3", payload_dir="/p", quick=False, thresholds={}, timeout_s=9
    )
    assert "CUDA_VISIBLE_DEVICES" not in unpinned


def _doc(status: str, fp16: float, failed: str | None = None) -> dict:
    checks = [{"name": "speedup_fp16", "kind": "speed", "status": status, "reason": "r"}]
    if failed:
        checks[0]["reason"] = failed
    return {
        "workload": "mixed_precision",
        "config": {},
        "metrics": {"speedup_fp16": fp16},
        "checks": checks,
        "verdict": {"status": status, "reason": failed or "ok"},
    }


def test_one_slow_gpu_of_four_fails_the_workload_by_name() -> None:
    docs = {str(g): _doc("pass", 2.6) for g in range(4)}
    docs["2"] = _doc("fail", 1.1, "speed-up 1.1 below 1.96")
    merged = combine_gpus(docs)
    assert merged["verdict"] == {"status": "fail", "reason": "GPU 2: speed-up 1.1 below 1.96"}
    assert merged["metrics"] == {"speedup_fp16": 2.6}  # GPU 0's, as one document per workload
    assert merged["per_gpu"]["2"]["metrics"]["speedup_fp16"] == 1.1
    assert [c["name"] for c in merged["checks"] if c["status"] == "fail"] == ["gpu2:speedup_fp16"]
    assert merged["config"]["gpu_under_test"] == ["0", "1", "2", "3"]


def test_all_healthy_keeps_the_first_gpus_verdict_and_a_single_gpu_is_unchanged() -> None:
    merged = combine_gpus({"0": _doc("pass", 2.6), "1": _doc("pass", 2.5)})
    assert merged["verdict"]["status"] == "pass" and "per_gpu" in merged
    single = combine_gpus({"0": _doc("pass", 2.6)})
    assert "per_gpu" not in single and single["config"]["gpu_under_test"] == "0"


def test_parallel_command_runs_every_gpu_at_once_and_keeps_each_document(tmp_path: Path) -> None:
    # Each stand-in "workload" waits for the other's marker file: run one after the other,
    # neither would finish (timeout 5 -> no document); run at once, both print theirs.
    commands = {
        str(g): (
            f"touch {tmp_path}/started{g}; "
            f"timeout 5 sh -c 'until [ -e {tmp_path}/started{1 - g} ]; do sleep 0.05; done' && "
            f'echo \'{{"workload": "resnet50", "gpu": "{g}"}}\'; echo "log of {g}" >&2'
        )
        for g in (1, 0)
    }
    done = subprocess.run(
        ["sh", "-c", parallel_command(commands)], capture_output=True, text=True, timeout=30
    )
    texts = split_documents(done.stdout, ["0", "1"])
    assert [json.loads(texts[o])["gpu"] for o in ("0", "1")] == ["0", "1"]
    assert "log of 0" in done.stderr and "log of 1" in done.stderr


def test_parallel_command_refuses_an_ordinal_that_is_not_a_number() -> None:
    with pytest.raises(SelectionError):
        parallel_command({"0": "true", "1; rm -rf /": "true"})


def test_a_process_that_printed_nothing_leaves_an_empty_text_for_its_gpu() -> None:
    assert split_documents("", ["0", "1"]) == {"0": "", "1": ""}


class _LocalHost:
    """testinfra's host.run, as far as the suite uses it: a real shell on this machine."""

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
        done.rc = done.returncode  # type: ignore[attr-defined]
        return done


def test_the_suite_merges_the_documents_of_every_gpu_run_at_once() -> None:
    from validation.test_workloads import _parallel_processes

    recorded = Path(__file__).parents[1] / "fixtures/results/workloads/resnet50.json"
    commands: dict[str | None, str] = {g: f"cat {recorded}" for g in ("0", "1", "2")}
    docs = _parallel_processes(_LocalHost(), "resnet50", commands, "full")
    assert sorted(docs) == ["0", "1", "2"]
    merged = combine_gpus(docs)
    assert merged["config"]["gpu_under_test"] == ["0", "1", "2"]
    assert set(merged["per_gpu"]) == {"0", "1", "2"}


def _resnet(status: str, amp: float) -> dict:
    """A per-GPU resnet50 document as the workload writes one (figure names as the floors)."""
    return {
        "workload": "resnet50",
        "config": {},
        "metrics": {"resnet50.images_per_s.amp": amp, "resnet50.images_per_s.amp_ci": [0, 1]},
        "checks": [{"name": "throughput_amp", "kind": "speed", "status": status, "reason": "r"}],
        "verdict": {"status": status, "reason": "r"},
    }


def test_n11_one_slow_gpu_fails_by_the_outlier_rule_without_a_floor() -> None:
    # H100 has no ResNet-50 floor: every GPU's throughput check is not_applicable. GPU 5 at
    # 80 % of its siblings (the review's "one slow GPU of 8", 15-25 % slower) passed before.
    docs = {str(g): _resnet("not_applicable", 3000.0) for g in range(8)}
    docs["5"] = _resnet("not_applicable", 2400.0)
    merged = combine_gpus(docs)
    assert merged["verdict"]["status"] == "fail"
    assert "GPU 5 (20% below)" in merged["verdict"]["reason"]
    (check,) = [c for c in merged["checks"] if c["name"].endswith(".outliers")]
    assert check["name"] == "resnet50.images_per_s.amp.outliers" and check["kind"] == "speed"


def test_n11_gpus_within_10_percent_and_two_gpu_hosts_are_not_outliers() -> None:
    docs = {str(g): _resnet("pass", 2000.0 - 20 * g) for g in range(8)}  # 7 % spread
    assert combine_gpus(docs)["verdict"]["status"] == "pass"
    pair = combine_gpus({"0": _resnet("pass", 2000.0), "1": _resnet("pass", 1000.0)})
    assert pair["verdict"]["status"] == "pass"  # no median of 2 (floor_checks.outliers)
