"""Issue 34's way out for a fleet one control process cannot hold, on the sandbox: one control
process per rack (here a host each), started side by side with `--limit` to its rack, for the
deploy, `gpufleet drift` and `gpufleet validate` into one results folder (docs/fleet-scale.md).

Each process keeps its own state per host (deploy stamp, results `DIR/<host>/<run id>.json`,
JUnit per run id), so the side-by-side runs neither wait on nor overwrite each other."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gpufleet.report.schema import validate_results
from gpufleet.stages.monitoring import TIMER
from tests import pyinfra_cli
from tests.integration.conftest import REPO, Sandbox, running_sandbox

pytestmark = pytest.mark.integration

INVENTORY = "inventories/sandbox.py"
RACKS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
# One cheap check (no TensorFlow): the side-by-side runs and their files are under test here,
# not the workloads (the quick tier runs end to end in test_deploy_e2e).
CHECK = "host_state::os_supported"


@pytest.fixture(scope="module")
def fleet(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(len(RACKS), standins=True, from_snapshot=provisioned) as sandbox:
        yield sandbox


def side_by_side(argvs: Sequence[list[str]], logs: Path) -> list[tuple[int, str, str]]:
    """Start every command at once, then wait for all: (exit status, stdout, stderr) each.
    Output goes to files, not pipes: a full pipe would hold a process until it is read."""
    logs.mkdir(parents=True, exist_ok=True)
    env = pyinfra_cli.environment()
    started = []
    for i, argv in enumerate(argvs):
        out, err = logs / f"{i}.out", logs / f"{i}.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen(
                argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
            )
        started.append((proc, out, err))
    return [(p.wait(timeout=1800), out.read_text(), err.read_text()) for p, out, err in started]


def gpufleet_argv(command: str, rack: str, results: Path, *args: str) -> list[str]:
    """`gpufleet COMMAND` on one rack, its results in the shared folder."""
    return [
        sys.executable, "-m", "gpufleet.cli", command, INVENTORY, *args,
        "--limit", rack, "--results-dir", str(results), "-q",
    ]  # fmt: skip


def deploy_argv(rack: str) -> list[str]:
    return [pyinfra_cli.PYINFRA, "-y", "--json", "--limit", rack, INVENTORY, "deploy/gpu_node.py"]


def changed_hosts(results: dict) -> set[str]:
    """Hosts an operation changed, but for the per-host deploy lock every run takes and
    releases (gpufleet run_start / run_end)."""
    return {
        host
        for op in results["operations"]
        if "deploy lock" not in op["name"]
        for host in op["success"]
    }


def test_one_deploy_process_per_rack_side_by_side_then_each_a_no_op(
    fleet: Sandbox, tmp_path: Path
) -> None:
    """Each host's periodic timer stopped by hand: each rack's process starts its own again
    (and only its own), then a second round changes nothing on any rack."""
    for rack in RACKS:
        assert fleet.ssh(rack, f"systemctl stop {TIMER}").returncode == 0
    first = side_by_side([deploy_argv(rack) for rack in RACKS], tmp_path / "first")
    for rack, (status, out, err) in zip(RACKS, first, strict=True):
        assert status == 0, f"{rack}: exit {status}\n{err[-3000:]}"
        results = json.loads(out)["results"]
        assert results["failed_hosts"] == [], (rack, results["failed_hosts"])
        changed = changed_hosts(results)
        assert changed == {rack}, f"the process limited to {rack} changed {sorted(changed)}"
        assert fleet.ssh(rack, f"systemctl is-active {TIMER}").stdout.strip() == "active"
    # A run that changed something leaves no stamp: the next one plans in full, finds nothing
    # to change, and stamps (test_deploy_e2e covers the stamped round after it).
    again = side_by_side([deploy_argv(rack) for rack in RACKS], tmp_path / "again")
    for rack, (status, out, err) in zip(RACKS, again, strict=True):
        assert status == 0, f"{rack}: exit {status}\n{err[-3000:]}"
        results = json.loads(out)["results"]
        changed = changed_hosts(results)
        assert (results["failed_hosts"], changed) == ([], set()), (rack, changed)


def test_drift_and_validate_per_rack_side_by_side_into_one_results_folder(
    fleet: Sandbox, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    drift = side_by_side(
        [gpufleet_argv("drift", rack, results, "--no-validation", "--json") for rack in RACKS],
        tmp_path / "drift",
    )
    for rack, (status, out, err) in zip(RACKS, drift, strict=True):
        assert status == 0, f"{rack}: exit {status}\n{out[-2000:]}\n{err[-2000:]}"
        assert sorted(json.loads(out)["hosts"]) == [rack]
        assert (results / rack / "drift.json").is_file()
    quick = ("--tier", "quick", "--select", CHECK)
    validate = side_by_side(
        [gpufleet_argv("validate", rack, results, *quick) for rack in RACKS], tmp_path / "validate"
    )
    run_ids = set()
    for rack, (status, out, err) in zip(RACKS, validate, strict=True):
        assert status == 0, f"{rack}: exit {status}\n{out[-2000:]}\n{err[-2000:]}"
        (path,) = (results / rack).glob("2*Z-*.json")  # DIR/<host>/<run id>.json
        doc = json.loads(path.read_text())
        validate_results(doc)
        assert (doc["host"], doc["status"]) == (rack, "pass"), doc["status"]
        assert [c["name"] for c in doc["checks"]] == [CHECK]
        run_ids.add(path.stem)
    assert len(run_ids) == len(RACKS)  # one run id per process, so none overwrote another
    assert sorted(p.stem for p in (results / "junit").glob("*.xml")) == sorted(run_ids)
