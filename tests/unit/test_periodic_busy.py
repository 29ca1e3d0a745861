"""The periodic run never disturbs a user's job: a busy GPU means no workload is started.

The busy host's nvidia-smi answers are the recorded ones in tests/fixtures/gpu_processes
(SOURCES.md); the idle answers are a stand-in written for this test (a header and idle rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_periodic import NVIDIA_SMI, fake_pci_bus, latest, replay, run

__all__ = ["replay"]  # the fixture, used by name

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_processes"
IDLE_GPUS = "index, uuid, utilization.gpu [%]\n0, GPU-idle-stand-in, 0 %\n"
IDLE_APPS = "pid, process_name, gpu_uuid\n"


def fake_smi(tmp_path: Path, gpus: str, apps: str) -> None:
    """nvidia-smi answering the guard's two queries, and -q -x with a recorded T4 report."""
    (tmp_path / "gpus.csv").write_text(gpus)
    (tmp_path / "apps.csv").write_text(apps)
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *--query-gpu=index,uuid,utilization.gpu*) exec /bin/cat {tmp_path / 'gpus.csv'} ;;\n"
        f"  *--query-compute-apps*) exec /bin/cat {tmp_path / 'apps.csv'} ;;\n"
        f"  *) exec /bin/cat {NVIDIA_SMI / 'tesla-t4-515.xml'} ;;\n"
        "esac\n"
    )
    tool.chmod(0o755)


def _expectations(tmp_path: Path) -> Path:
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"expectations_version": 1, "host_data": {"gpu_count": 1}}))
    return path


def test_a_busy_gpu_starts_no_workload_and_is_inconclusive(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pci_bus(tmp_path, monkeypatch, "0x030200")
    fake_smi(
        tmp_path,
        (FIXTURES / "query_gpu_index_uuid_utilization_4_gpus.csv").read_text(),
        (FIXTURES / "apps_uuid_pid_memory_3_processes.csv").read_text(),
    )
    args = ("--workloads", "xla,gemm", "--expectations", str(_expectations(tmp_path)))
    run(tmp_path, replay, *args)
    checks = {c["name"]: c for c in latest(tmp_path)["checks"]}
    # Whatever the host's other checks say (no dcgmi here), no workload check is a fail.
    assert not [
        n for n, c in checks.items() if n.startswith("workloads::") and c["status"] == "fail"
    ]
    for name in ("workloads::xla", "workloads::gemm"):
        assert checks[name]["status"] == "inconclusive"
        assert "GPU busy (PIDs 1912379" in checks[name]["message"]
        assert "not to disturb" in checks[name]["message"]
    assert not (tmp_path / "replay.log").exists()  # no workload process was started


def test_an_idle_gpu_runs_the_workloads(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pci_bus(tmp_path, monkeypatch, "0x030200")
    fake_smi(tmp_path, IDLE_GPUS, IDLE_APPS)
    args = ("--workloads", "xla", "--expectations", str(_expectations(tmp_path)))
    run(tmp_path, replay, *args)
    checks = {c["name"]: c for c in latest(tmp_path)["checks"]}
    assert checks["workloads::xla"]["status"] != "inconclusive"
    assert (tmp_path / "replay.log").read_text().count("validation.workloads.xla") >= 1


def test_single_gpu_workloads_are_pinned_to_each_gpu_in_turn(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pci_bus(tmp_path, monkeypatch, "0x030200", "0x030200")  # two GPUs
    fake_smi(tmp_path, IDLE_GPUS, IDLE_APPS)
    pinned = tmp_path / "pinned"
    # Stand-in interpreter in front of the replay one: notes the GPU it was pinned to.
    wrapper = tmp_path / "pinned-python"
    wrapper.write_text(
        f'#!/bin/sh\necho "${{CUDA_VISIBLE_DEVICES:--}} ${{CUDA_DEVICE_ORDER:--}} $2" >> {pinned}\n'
        f'exec {replay} "$@"\n'
    )
    wrapper.chmod(0o755)
    args = ("--tier", "full", "--workloads", "resnet50,xla,allreduce")
    args += ("--expectations", str(_expectations(tmp_path)))
    run(tmp_path, wrapper, *args)
    lines = pinned.read_text().splitlines()
    assert "0 PCI_BUS_ID validation.workloads.resnet50" in lines
    assert "1 PCI_BUS_ID validation.workloads.resnet50" in lines
    assert "0 PCI_BUS_ID validation.workloads.xla" in lines
    assert "1 PCI_BUS_ID validation.workloads.xla" not in lines  # features: GPU 0 only
    assert "- - validation.workloads.allreduce" in lines  # every GPU, unpinned
    resnet = next(w for w in latest(tmp_path)["workloads"] if w["workload"] == "resnet50")
    assert resnet["config"]["gpu_under_test"] == ["0", "1"]
