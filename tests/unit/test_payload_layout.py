"""The payload's one layout: <payload_dir>/<version>/{validation,gpufleet}, current -> <version>.

The periodic runner and the workloads import from it on a host that has the environment's
Python but not gpufleet's control-node dependencies (pyinfra, rich, jinja2, matplotlib).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import gpufleet
from gpufleet.operations.payload import link_target
from gpufleet.spec import NodeSpec
from gpufleet.stages.monitoring import unit_texts
from gpufleet.stages.validation_payload import payload_archive, payload_paths
from validation.test_workloads import workload_command

# Control-node-only packages: none may be needed by what runs on the host.
BLOCKED = ("pyinfra", "rich", "jinja2", "markupsafe", "matplotlib", "gevent", "click", "pytest")
# What validation/periodic/runner.py imports, directly or when it runs.
HOST_MODULES = (
    "validation.periodic.runner",
    "validation.periodic.checks",
    "validation.periodic.dcgm",
    "gpufleet.vendor",
    "gpufleet.health",
    "gpufleet.parsers",
    "gpufleet.report.schema",
    "gpufleet.report.prometheus",
    "gpufleet.report.figures",
    "gpufleet.report.fleet",
    "gpufleet.validate.baseline",
    "validation.verdicts.thresholds",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The payload unpacked as the stage leaves it: <dir>/<version>/... and current -> version."""
    root = tmp_path_factory.mktemp("payload")
    dest, current = payload_paths(str(root))
    with tarfile.open(fileobj=io.BytesIO(payload_archive()), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    os.symlink(link_target(dest, current), current)
    return Path(current)


def test_payload_holds_both_packages_under_the_version(installed):
    assert Path(os.readlink(installed)) == Path(gpufleet.__version__)
    assert (installed / "validation" / "periodic" / "runner.py").is_file()
    assert (installed / "validation" / "workloads" / "mirrored.py").is_file()
    assert (installed / "gpufleet" / "health.py").is_file()
    assert not list(installed.rglob("__pycache__"))


def test_paths_and_link_target():
    assert payload_paths("/opt/gpufleet/validation/") == (
        f"/opt/gpufleet/validation/{gpufleet.__version__}",
        "/opt/gpufleet/validation/current",
    )
    assert link_target("/opt/p/0.1.0", "/opt/p/current") == "0.1.0"
    assert link_target("/opt/p/0.1.0", "/srv/current") == "/opt/p/0.1.0"


def test_host_modules_import_without_control_node_packages(installed):
    """python -S (no site-packages) with the control-node packages blocked on top."""
    code = (
        "import sys, json\n"
        f"sys.modules.update(dict.fromkeys({BLOCKED!r}))\n"
        "import importlib\n"
        f"files = {{m: importlib.import_module(m).__file__ for m in {HOST_MODULES!r}}}\n"
        "print(json.dumps(files))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=installed,
        env={"PYTHONPATH": str(installed), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)
    assert all(Path(path).is_relative_to(installed.resolve()) for path in files.values()), files


def test_periodic_runner_starts_from_the_payload(installed):
    result = subprocess.run(
        [sys.executable, "-S", "-m", "validation.periodic", "--help"],
        cwd=installed,
        env={"PYTHONPATH": str(installed), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--textfile-dir" in result.stdout


def test_unit_runs_from_current_with_pythonpath_there():
    spec = NodeSpec.from_host_data({"payload_dir": "/opt/gpufleet/validation"})
    service = unit_texts(spec, textfile=False)["/etc/systemd/system/gpufleet-periodic.service"]
    assert service is not None
    current = "/opt/gpufleet/validation/current"
    assert f"ConditionPathExists={current}/validation/periodic/runner.py" in service
    assert f"WorkingDirectory={current}\n" in service
    assert f'Environment="PYTHONPATH={current}"' in service


def test_workload_command_runs_in_the_payload(installed, tmp_path):
    """The suite's command, run by a shell here, with a stand-in workload module in the payload
    that reports where it ran and what it could import."""
    probe = installed / "validation" / "workloads" / "layout_probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "import gpufleet.health\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "json.dump({'cwd': os.getcwd(), 'health': gpufleet.health.__file__,\n"
        "           'quick': '--quick' in sys.argv}, open(path, 'w'))\n"
    )
    try:
        command = workload_command(
            "layout_probe",
            python=sys.executable,
            payload_dir=str(installed),
            quick=True,
            thresholds={},
            timeout_s=60,
        )
        result = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
    finally:
        probe.unlink()
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert Path(doc["cwd"]) == installed.resolve()
    assert Path(doc["health"]).resolve().is_relative_to(installed.resolve())
    assert doc["quick"] is True
    assert shlex.quote(str(installed)) in command
