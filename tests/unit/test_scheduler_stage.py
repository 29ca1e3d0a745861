"""The scheduler_integration stage's files: gres.conf, the health check program, slurm.conf."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages import scheduler
from tests.conftest import REPO_ROOT


def test_gres_conf_names_device_files_and_no_nvml() -> None:
    assert "Name=gpu File=/dev/nvidia[0-7]\n" in scheduler.gres_conf(8)
    assert "Name=gpu File=/dev/nvidia0\n" in scheduler.gres_conf(1)
    assert "AutoDetect" not in scheduler.gres_conf(8)


def test_slurm_lines_name_the_program_and_interval() -> None:
    assert scheduler.slurm_lines(120) == {
        "HealthCheckProgram": "/usr/local/sbin/gpufleet-healthcheck",
        "HealthCheckInterval": "120",
        "HealthCheckNodeState": "ANY",
    }


def test_health_check_program_runs_the_payload_in_a_real_shell(tmp_path: Path) -> None:
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "current").symlink_to(REPO_ROOT)
    script = tmp_path / "gpufleet-healthcheck"
    script.write_text(scheduler.healthcheck_script(str(payload)))
    script.chmod(0o755)
    if Path(scheduler.HEALTHCHECK_CONFIG).exists():
        pytest.skip(f"{scheduler.HEALTHCHECK_CONFIG} exists on this machine")
    # as slurmd starts it: no PATH of its own
    proc = subprocess.run([str(script)], capture_output=True, text=True, timeout=60, env={})
    # it reached validation.host.healthcheck from the payload, which found no config here
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"cannot read {scheduler.HEALTHCHECK_CONFIG}" in proc.stderr


def test_scheduler_keys_are_checked() -> None:
    spec = NodeSpec.from_host_data({"scheduler": "slurm", "slurm_controller": "10.0.0.5"})
    assert spec.scheduler == "slurm" and spec.slurm_health_interval == 300
    for bad in (
        {"scheduler": "pbs"},
        {"slurm_controller": "ctl; reboot"},
        {"slurm_controller": "-oProxyCommand=x"},
        {"slurm_health_interval": 0},
    ):
        with pytest.raises(SpecError):
            NodeSpec.from_host_data(bad)


def test_health_check_program_finds_its_tools_whatever_path_slurmd_gives(tmp_path: Path) -> None:
    """slurmd gives the program next to no environment; the script sets PATH itself."""
    import json

    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "current").symlink_to(REPO_ROOT)
    script = tmp_path / "gpufleet-healthcheck"
    script.write_text(scheduler.healthcheck_script(str(payload)))
    script.chmod(0o755)
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps({"gpu_less": True, "driver_packages": ["nvidia-open"]}))
    proc = subprocess.run(
        [str(script), "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/nonexistent"},
    )
    doc = json.loads(proc.stdout.splitlines()[0])
    messages = " ".join(message for _c, _s, message in doc["results"])
    assert "not found" not in messages, messages  # dpkg-query and systemctl were found
