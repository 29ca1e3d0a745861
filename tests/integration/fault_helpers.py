"""What the fault e2e tests share: an inventory with per-host overrides from the environment,
the real pyinfra CLI on it, the plan a dry run reports, drift's arguments, and SSH checks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gpufleet.spec import NodeSpec
from tests import pyinfra_cli
from tests.integration.conftest import REPO, Sandbox

DEPLOY = "deploy/gpu_node.py"
TIMEOUT_S = 1800
OVERRIDES_ENV = "GPUFLEET_FAULT_OVERRIDES"
# The sandbox inventory, with per-host keys from the environment (host data beats group data).
INVENTORY_TEXT = """\
import json, os
from gpufleet.sandbox.inventory import group_data, host_entries
from gpufleet.sandbox.state import load_state

_state = load_state()
_over = json.loads(os.environ.get("{env}", "{{}}"))
sandbox = (
    [(name, {{**data, **_over.get(name, {{}})}}) for name, data in host_entries(_state)],
    group_data(_state),
)
"""


def pyinfra(
    inventory: Path, *args: str, overrides: dict | None = None, wait: bool = True
) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """The real pyinfra CLI on `inventory` with per-host `overrides`; started and not waited
    for when not `wait`."""
    env = {OVERRIDES_ENV: json.dumps(overrides or {})}
    if not wait:
        return pyinfra_cli.start(inventory, *args, env=env)
    return pyinfra_cli.deploy(inventory, *args, env=env, timeout=TIMEOUT_S)


def planned_changes(inventory: Path, name: str, overrides: dict | None = None) -> list[str]:
    """Operations `pyinfra --dry --json` would change on `name`."""
    proc = pyinfra(inventory, "--dry", "--json", "--limit", name, overrides=overrides)
    assert isinstance(proc, subprocess.CompletedProcess)
    plan = pyinfra_cli.json_of(proc)["plan"]
    return [
        op["name"]
        for op in plan
        if name in op["hosts_with_change"] + op["hosts_with_conditional_change"]
    ]


def deploy(inventory: Path, name: str, overrides: dict | None = None):
    proc = pyinfra(inventory, "--limit", name, overrides=overrides)
    assert isinstance(proc, subprocess.CompletedProcess)
    return proc


def drift_args(inventory: Path, name: str) -> list[str]:
    # The deploy named explicitly: the tests do not depend on drift's default path.
    return [str(inventory), "--deploy", str(REPO / DEPLOY), "--no-validation", "--limit", name]


def ok(sandbox: Sandbox, name: str, command: str) -> str:
    result = sandbox.ssh(name, command, timeout=600)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


def site_packages(sandbox: Sandbox, spec: NodeSpec, name: str) -> str:
    return ok(
        sandbox,
        name,
        f"{spec.python_bin} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'",
    ).strip()
