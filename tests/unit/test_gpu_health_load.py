"""The under-load health sample waits for the load script's "every GPU loaded" marker.

The load script runs for real here against a stand-in ``tensorflow`` module (two fake GPUs
whose first matmul takes a while; named a stand-in: no GPU or TF GPU build here), and the
shell command runs in a real sh with a stand-in nvidia-smi that logs when it was called.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from validation import test_gpu_health as health_suite

# Stand-in for TensorFlow: GPUs named by GPUFAKE_GPUS, each first matmul sleeping
# GPUFAKE_FIRST_S (GPUFAKE_STUCK names a GPU whose first matmul never ends).
FAKE_TF = """
import os, threading, time
class _T:
    def __init__(self, device): self.device = device
    def __getitem__(self, key): return self
    def numpy(self): return 0.0
_seen = set()
_device = threading.local()
class _Dev:
    def __init__(self, name): self.name = name
    def __enter__(self): _device.name = self.name
    def __exit__(self, *a): return False
def device(name): return _Dev(name)
class config:
    @staticmethod
    def list_physical_devices(kind):
        names = [n for n in os.environ.get("GPUFAKE_GPUS", "").split(",") if n]
        return [type("D", (), {"name": "/physical_device:" + n})() for n in names]
class random:
    @staticmethod
    def normal(shape): return _T(_device.name)
class linalg:
    @staticmethod
    def matmul(a, b):
        if a.device not in _seen:
            _seen.add(a.device)
            if a.device == os.environ.get("GPUFAKE_STUCK"):
                time.sleep(3600)
            time.sleep(float(os.environ.get("GPUFAKE_FIRST_S", "0")))
        time.sleep(0.01)
        return a
"""


@pytest.fixture
def fake_tf(tmp_path: Path) -> Path:
    (tmp_path / "tensorflow.py").write_text(FAKE_TF)
    return tmp_path


def test_the_script_reports_loaded_only_after_every_gpu_ran(fake_tf: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(fake_tf))
    env = {"PYTHONPATH": str(fake_tf), "GPUFAKE_GPUS": "GPU:0,GPU:1", "GPUFAKE_FIRST_S": "1.5"}
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", health_suite.LOAD_SCRIPT], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    loaded_after = time.monotonic() - start
    proc.kill()
    proc.wait()
    assert line.split() == [health_suite.LOADED, "2", "2"]
    assert loaded_after >= 1.5  # not before the slow first matmuls finished


def _shell(tmp_path: Path, python: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "smi $(date +%s.%N)" >> {calls}\necho "<nvidia_smi_log/>"\n')
    smi.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", health_suite.load_command(str(python))],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, calls.read_text().split() if calls.exists() else []


def test_nvidia_smi_samples_after_the_marker_not_at_a_fixed_time(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(health_suite, "SETTLE_S", 0)
    python = tmp_path / "python"
    marks = tmp_path / "marks"
    # Stand-in interpreter: loads for 2.5 s, then prints the marker, then holds 2 s.
    python.write_text(
        "#!/bin/sh\n"
        f'sleep 2.5; echo "mark $(date +%s.%N)" >> {marks}; echo {health_suite.LOADED} 8 8; '
        "sleep 2; exit 0\n"
    )
    python.chmod(0o755)
    done, calls = _shell(tmp_path, python)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "<nvidia_smi_log/>"
    marked = float(marks.read_text().split()[1])
    assert float(calls[1]) >= marked  # sampled once the GPUs were loaded


def test_a_load_that_never_reports_fails_the_fixture(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(health_suite, "SETTLE_S", 0)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'ImportError: libcudart.so.12' >&2; exit 1\n")
    python.chmod(0o755)
    done, calls = _shell(tmp_path, python)
    assert done.returncode != 0
    assert calls  # nvidia-smi still ran (its report is evidence), yet the check fails
