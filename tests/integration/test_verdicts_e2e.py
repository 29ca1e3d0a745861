"""Issue 12 on the sandbox: inconclusive speed checks make a host "unproven" (never "pass",
never a baseline), and a periodic run compares with its tier's baseline on the host and
publishes the regression state in the Prometheus textfile.

Sandbox hosts have no GPU, so their speed checks are normally not applicable. The inventory
here (a copy of inventories/sandbox.py) sets two thresholds the on-host suite honours:
``speed_verdicts_without_gpu = 1`` (judge the CPU timings; a test knob only) and
``speed_between_run_sd = 10`` (a between-process spread of 1000 %), so that no CPU run can
clear or miss a speed threshold: every speed check ends inconclusive, by the harness's own rule.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.floors.names import name_of_key
from gpufleet.report.schema import validate_results
from gpufleet.sandbox.inventory import group_data
from gpufleet.spec import NodeSpec
from gpufleet.stages import monitoring
from gpufleet.validate import baseline
from tests.integration.conftest import Sandbox, first_deploy, gpufleet, running_sandbox
from validation.verdicts.tiers import PROCESSES

pytestmark = pytest.mark.integration

HOST = "gfsb-h1"
# The figures' stable names (gpufleet.report.figures): the xla workload's float32 speed-up as
# a CPU runs it, and a mixed precision figure the periodic xla-only run will not have.
XLA_FIGURE = "xla/xla.speedup.fp32"
MIXED_FIGURE = "mixed_precision/mixed_precision.speedup.fp16"
THRESHOLDS = {"speed_verdicts_without_gpu": 1, "speed_between_run_sd": 10.0}
INVENTORY = f"""\
from gpufleet.sandbox.inventory import group_data, host_entries
from gpufleet.sandbox.state import load_state

_state = load_state()
_data = dict(group_data(_state))
_data["thresholds"] = {{**_data.get("thresholds", {{}}), **{THRESHOLDS!r}}}
sandbox = (host_entries(_state), _data)
"""


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(1, standins=True, from_snapshot=provisioned) as running:
        yield running


@pytest.fixture(scope="module")
def inventory(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sandbox inventory with the two thresholds, deployed with the real pyinfra CLI on a
    provisioned host."""
    path = tmp_path_factory.mktemp("inventory") / "undecidable.py"
    path.write_text(INVENTORY)
    first_deploy(path)
    return path


def test_inconclusive_speed_checks_make_the_host_unproven(inventory: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = gpufleet(
        "validate",
        str(inventory),
        "--tier",
        "full",  # xla runs in the full tier (validation/verdicts/tiers.py)
        "--results-dir",
        str(results),
        "--select",
        "xla",
        check=False,
        timeout=1200,
    )
    assert proc.returncode == 4, proc.stdout[-4000:] + proc.stderr[-2000:]  # unproven
    assert "unproven" in proc.stdout
    run_id = re.search(r"results: .*/\*/(\S+)\.json", proc.stdout)
    assert run_id, proc.stdout[-2000:]
    doc = json.loads((results / HOST / f"{run_id.group(1)}.json").read_text())
    validate_results(doc)
    assert doc["status"] == "unproven" and doc["schema_version"] == 3
    check = next(c for c in doc["checks"] if c["name"] == "workloads::xla")
    assert check["status"] == "inconclusive", check
    (xla,) = doc["workloads"]
    assert xla["processes"] == PROCESSES["full"]  # the full tier's fresh processes (1)
    speed = next(c for c in xla["checks"] if c["name"] == "xla_speedup_fp32")
    assert speed["status"] == "inconclusive"
    # The host history's 1000 % between-run spread, plus the measured within-process noise
    # (root of the sum of squares): 1000.0 % or a little more, never less.
    spread = re.search(r"between-run spread ([0-9.]+) % \(host history\)", speed["reason"])
    assert spread and 1000.0 <= float(spread.group(1)) < 1010.0, speed["reason"]
    if PROCESSES["full"] > 1:  # judged again over the processes (validation.verdicts.processes)
        assert speed["judgement"]["processes"] == PROCESSES["full"]
    else:  # one process: its own verdict stands, with the evidence it was judged on
        assert "judgement" not in speed and speed["evidence"]["metric"], speed
    # Never a baseline, of either tier.
    assert not baseline.baseline_path(results, HOST, "quick").exists()
    assert not baseline.baseline_path(results, HOST).exists()
    junit = ET.parse(results / "junit" / f"{run_id.group(1)}.xml").getroot()
    (suite,) = list(junit.iter("testsuite"))
    unproven = suite.find("testcase[@name='unproven']")
    assert unproven is not None and unproven.find("failure") is not None


def stand_in_baseline() -> dict:
    """A stand-in quick-tier baseline as 20 healthy periodic runs would have gathered it: XLA
    at ~50x (no CPU run comes near) and a mixed precision figure the run below will not have."""
    runs = []
    for index in range(baseline.RUNS_WANTED["quick"]):
        figures = {
            XLA_FIGURE: {"value": 50.0 * (1 + 0.01 * (index % 3 - 1)), "kind": "speedup"},
            MIXED_FIGURE: {"value": 2.5, "kind": "speedup"},
        }
        runs.append({"run_id": f"20261101T{index:02d}0000Z-00000{index % 10}", "figures": figures})
    return {**baseline.new_baseline(HOST, "quick"), "runs": runs}


def test_a_periodic_run_compares_with_its_tier_baseline_and_publishes_it(
    inventory: Path, sandbox: Sandbox
) -> None:
    seeded = json.dumps(stand_in_baseline())
    path = f"{monitoring.STATE_DIR}/baseline-quick.json"
    wrote = sandbox.ssh(
        HOST, f"mkdir -p {monitoring.STATE_DIR} && cat > {path} <<'EOF'\n{seeded}\nEOF"
    )
    assert wrote.returncode == 0, wrote.stderr
    unit = sandbox.ssh(HOST, f"cat {monitoring.UNIT_DIR}/{monitoring.SERVICE}").stdout
    (exec_start,) = re.findall(r"^ExecStart=(.+)$", unit, re.MULTILINE)
    workdir = re.findall(r"^WorkingDirectory=(.+)$", unit, re.MULTILINE)
    cd = f"cd {workdir[0]} && PYTHONPATH={workdir[0]} " if workdir else ""
    # What the timer starts, limited to one workload to keep the run short.
    ran = sandbox.ssh(HOST, f"{cd}{exec_start} --workloads xla", timeout=900)
    assert ran.returncode == 4, ran.stdout + ran.stderr  # unproven
    state = json.loads(sandbox.ssh(HOST, f"cat {monitoring.STATE_DIR}/state.json").stdout)
    assert state["last_status"] == "unproven"
    regression = state["regression"]
    assert regression["state"] == "regressed" and regression["runs"] == 20
    assert regression["figures"][XLA_FIGURE]["status"] == "regressed"
    vanished = regression["figures"][MIXED_FIGURE]
    assert vanished["status"] == "regressed" and "missing" in vanished["reason"]
    # Where the deploy configured it, and nowhere else: a wrong path fails here.
    spec = NodeSpec.from_host_data(group_data(sandbox.state))
    read = sandbox.ssh(HOST, f"cat {spec.textfile_dir}/gpufleet.prom")
    assert read.returncode == 0 and read.stdout, f"no {spec.textfile_dir}/gpufleet.prom"
    textfile = read.stdout
    families = {f.name: f.samples for f in text_string_to_metric_families(textfile)}
    states = {s.labels["state"]: s.value for s in families["gpufleet_regression_state"]}
    assert states == {"gathering": 0.0, "ok": 0.0, "regressed": 1.0}
    # figure: the dotted name (gpufleet.floors.names); key: the baseline's own key
    flags = {s.labels["key"]: s.value for s in families["gpufleet_figure_regressed"]}
    assert flags[XLA_FIGURE] == 1.0
    named = {s.labels["key"]: s.labels["figure"] for s in families["gpufleet_figure_regressed"]}
    assert named[XLA_FIGURE] == name_of_key(XLA_FIGURE)
    assert families["gpufleet_run_unproven"][0].value == 1.0
    # The unproven run did not join the baseline.
    stored = json.loads(sandbox.ssh(HOST, f"cat {path}").stdout)
    assert len(stored["runs"]) == 20
