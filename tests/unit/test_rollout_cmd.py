"""`gpufleet rollout` on the command line: the dry plan, refusals, resuming a state file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpufleet.rollout import state as st
from tests.conftest import REPO_ROOT


def rollout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "rollout", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def inventory(tmp_path: Path, data: str = '{"gpu_less": True}') -> str:
    path = tmp_path / "inv.py"
    path.write_text(f'gpus = (["gpu-a", "gpu-b", "gpu-c", "gpu-d"], {data})\n')
    return str(path)


def test_dry_prints_the_batches(tmp_path: Path) -> None:
    proc = rollout(
        inventory(tmp_path),
        "--dry",
        "--scheduler",
        "none",
        "--max-unavailable",
        "50%",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["batch 1: gpu-a, gpu-b", "batch 2: gpu-c, gpu-d"]
    assert not (tmp_path / "s.json").exists()


def test_dry_continues_from_a_state_file(tmp_path: Path) -> None:
    state = st.RolloutState({n: st.HostRecord(n) for n in ("gpu-a", "gpu-b", "gpu-c", "gpu-d")})
    state.hosts["gpu-a"].state = "done"
    state.hosts["gpu-b"].state = "failed"
    st.save(state, tmp_path / "s.json")
    proc = rollout(
        inventory(tmp_path),
        "--dry",
        "--scheduler",
        "none",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert proc.stdout.splitlines() == [
        "gpu-a: done (from the state file)",
        "gpu-b: failed (from the state file)",
        "batch 1: gpu-c",
        "batch 2: gpu-d",
    ]


def test_a_state_file_of_other_hosts_is_refused(tmp_path: Path) -> None:
    st.save(st.RolloutState({"other": st.HostRecord("other")}), tmp_path / "s.json")
    proc = rollout(
        inventory(tmp_path), "--scheduler", "none", "--state-file", str(tmp_path / "s.json")
    )
    assert proc.returncode == 2 and "is a rollout of other" in proc.stderr


def test_slurm_needs_the_controller_among_the_hosts(tmp_path: Path) -> None:
    inv = inventory(
        tmp_path, '{"gpu_less": True, "scheduler": "slurm", "slurm_controller": "ctl9"}'
    )
    proc = rollout(inv, "--dry")
    assert proc.returncode == 2
    assert "slurm_controller 'ctl9' is not a host of the inventory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    for args in (["--max-unavailable", "x"], ["--max-failures", "0"]):
        proc = rollout(inventory(tmp_path), "--dry", "--scheduler", "none", *args)
        assert proc.returncode == 2 and "gpufleet rollout:" in proc.stderr
        assert "Traceback" not in proc.stderr
