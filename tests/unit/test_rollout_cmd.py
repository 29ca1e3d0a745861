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
        "--cordon-cmd",
        "kubectl cordon {host}",
        "--max-unavailable",
        "50%",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "batch 1: gpu-a, gpu-b",
        "  gpu-a: drain: `kubectl cordon gpu-a`",
        "  gpu-b: drain: `kubectl cordon gpu-b`",
        "batch 2: gpu-c, gpu-d",
        "  gpu-c: drain: `kubectl cordon gpu-c`",
        "  gpu-d: drain: `kubectl cordon gpu-d`",
    ]
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
        "--no-drain",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert proc.stdout.splitlines() == [
        "gpu-a: done (from the state file)",
        "gpu-b: failed (from the state file)",
        "batch 1: gpu-c",
        "  gpu-c: drain: none (--no-drain)",
        "batch 2: gpu-d",
        "  gpu-d: drain: none (--no-drain)",
    ]


def test_a_state_file_of_other_hosts_is_refused(tmp_path: Path) -> None:
    st.save(st.RolloutState({"other": st.HostRecord("other")}), tmp_path / "s.json")
    proc = rollout(
        inventory(tmp_path),
        "--scheduler",
        "none",
        "--no-drain",
        "--state-file",
        str(tmp_path / "s.json"),
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
        proc = rollout(inventory(tmp_path), "--dry", "--scheduler", "none", "--no-drain", *args)
        assert proc.returncode == 2 and "gpufleet rollout:" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_data_typo_is_refused_before_any_host(tmp_path: Path) -> None:
    # review §2.4 item 3: `--dry --data driver_brnach=580` printed the batches and exited 0,
    # and the real run drained the first host before pyinfra refused the key
    for dry in (["--dry"], []):
        proc = rollout(
            inventory(tmp_path),
            *dry,
            "--scheduler",
            "none",
            "--no-drain",
            "--data",
            "driver_brnach=580",
            "--state-file",
            str(tmp_path / "s.json"),
        )
        assert proc.returncode == 2, proc.stdout
        assert "'driver_brnach'" in proc.stderr and "'driver_branch'" in proc.stderr
        assert "--data driver_brnach=580" in proc.stderr and "no host was touched" in proc.stderr
        assert "batch" not in proc.stdout and "Traceback" not in proc.stderr
        assert not (tmp_path / "s.json").exists()


def test_an_inventory_value_is_refused_with_its_group_data_file(tmp_path: Path) -> None:
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "gpus.py").write_text("reboot = 'maybe'\n")
    proc = rollout(inventory(tmp_path), "--dry", "--scheduler", "none", "--no-drain")
    assert proc.returncode == 2
    assert "every host (gpu-a, gpu-b, gpu-c, gpu-d), set in " in proc.stderr
    assert "group_data/gpus.py: reboot = 'maybe' is not one of" in proc.stderr


def test_bad_data_deploy_and_commands_are_all_refused_at_once(tmp_path: Path) -> None:
    proc = rollout(
        inventory(tmp_path),
        "--dry",
        "--scheduler",
        "none",
        "--cordon-cmd",
        "kubectl drain {hst}",
        "--deploy",
        str(tmp_path / "nope.py"),
        "--data",
        "gpu_count=x",
    )
    assert proc.returncode == 2 and "3 problems, no host was touched" in proc.stderr
    assert "gpu_count = 'x' has the wrong type" in proc.stderr
    assert "nope.py' does not exist; pass --deploy PATH" in proc.stderr
    assert "placeholder {hst}" in proc.stderr


def test_data_without_a_value_and_negative_waits_are_refused(tmp_path: Path) -> None:
    proc = rollout(inventory(tmp_path), "--dry", "--no-drain", "--data", "driver_branch")
    assert proc.returncode == 2 and "--data 'driver_branch' is not KEY=VALUE" in proc.stderr
    proc = rollout(inventory(tmp_path), "--dry", "--no-drain", "--wait-for-jobs", "-5")
    assert proc.returncode == 2 and "-5 is negative" in proc.stderr


def test_no_scheduler_needs_a_drain_command_or_no_drain(tmp_path: Path) -> None:
    # review §2.4 item 2: without a scheduler the rollout rebooted hosts with no drain
    for dry in (["--dry"], []):
        proc = rollout(inventory(tmp_path), *dry, "--state-file", str(tmp_path / "s.json"))
        assert proc.returncode == 2
        assert "no scheduler (scheduler none, the default) and no --cordon-cmd" in proc.stderr
        assert "--no-drain" in proc.stderr and not (tmp_path / "s.json").exists()
    slurm = inventory(tmp_path, '{"gpu_less": True, "scheduler": "slurm"}')
    proc = rollout(slurm, "--dry", "--no-drain")
    assert proc.returncode == 2 and "--no-drain goes with --scheduler none" in proc.stderr


def test_the_help_example_names_a_scheduler() -> None:
    proc = rollout("--help")
    example = proc.stdout.split("Example:", 1)[1].split("Exit status")[0]
    assert "--scheduler slurm" in example and "driver_branch=580" in example
