"""inventories/examples/ (issue 37 item 4): each example's plan comes out of
`pyinfra EXAMPLE deploy/gpu_node.py --dry` against @fake hosts of its kind, with every group
and host planned, and each passes gpufleet's own NodeSpec checks."""

from __future__ import annotations

import re
import runpy

import pytest

from gpufleet.spec import NodeSpec, is_ignored_key
from tests import pyinfra_cli
from tests.conftest import REPO_ROOT
from tests.unit.fake_examples import KINDS

EXAMPLES = REPO_ROOT / "inventories" / "examples"


def hosts(name: str) -> dict[str, dict]:
    """Host name -> its data (group data, then the host's own) as the example declares it."""
    out = {}
    for group, value in runpy.run_path(str(EXAMPLES / f"{name}.py")).items():
        if group.startswith("_") or not isinstance(value, tuple):
            continue
        names, data = value
        for host in names:
            host_name, extra = host if isinstance(host, tuple) else (host, {})
            out[host_name] = {**data, **extra}
    return out


def test_every_example_has_its_fake_machines() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_host_passes_the_spec_checks(name: str) -> None:
    for data in hosts(name).values():
        NodeSpec.from_host_data({k: v for k, v in data.items() if not is_ignored_key(k)})


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_example_plans_on_fake_hosts(name: str) -> None:
    done = pyinfra_cli.run(
        REPO_ROOT / "tests" / "unit" / "fake_examples.py",
        pyinfra_cli.GPU_NODE,
        "--dry",
        "--group-data",
        REPO_ROOT / "inventories" / "group_data",
        env={"GPUFLEET_EXAMPLE": name},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for host in hosts(name):  # every host was planned, none refused or left out
        ready = rf"\[@fake/{re.escape(host)}\]\s+Ready: \S*deploy/gpu_node.py"
        assert re.search(ready, done.stdout + done.stderr), host
    assert "gpufleet driver" in done.stderr and "gpufleet python_env" in done.stderr


@pytest.mark.parametrize("path", ["prod.py", "staging.py", *(f"examples/{k}.py" for k in KINDS)])
def test_no_example_sets_a_python_version_its_venv_ignores(path: str) -> None:
    # review §3 "also noted": v100_legacy set python_version "3.10" on a venv without uv, where
    # the plan builds on the OS's python3 and the value is silently unused
    for group, value in runpy.run_path(str(REPO_ROOT / "inventories" / path)).items():
        if group.startswith("_") or not isinstance(value, tuple):
            continue
        data = value[1]
        ignored = data.get("python_env") == "venv" and not data.get("use_uv")
        assert not (ignored and "python_version" in data), f"{path} group {group}"
