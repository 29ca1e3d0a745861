"""Issue 13 item 6 on the sandbox: `gpufleet validate --calibrate` writes a calibration file from
a host's full-tier runs, and a second validate run whose inventory names it (calibration_file)
judges with its floors: the results say "calibration" for each calibrated floor's origin.

The sandbox hosts have no GPU: the figures are CPU timings and the file is of the CPU kind
(gpu_model "cpu"), which the runner refuses for a host not declared gpu_less.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.floors import calibration
from gpufleet.floors.checks import figures_from
from gpufleet.report.schema import validate_results
from tests.integration.conftest import Sandbox, first_deploy, gpufleet, running_sandbox

pytestmark = pytest.mark.integration

HOST = "gfsb-h1"
# Two workloads with speed figures keep the three full-tier runs to a few minutes.
SELECT = "mirrored or xla"
INVENTORY = """\
from gpufleet.sandbox.inventory import group_data, host_entries
from gpufleet.sandbox.state import load_state

_state = load_state()
_data = dict(group_data(_state))
_data.update({extra!r})
sandbox = (host_entries(_state), _data)
"""


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(1, standins=True, from_snapshot=provisioned) as running:
        yield running


def _inventory(directory: Path, name: str, **extra: object) -> Path:
    path = directory / name
    path.write_text(INVENTORY.format(extra=extra))
    return path


@pytest.fixture(scope="module")
def inventory(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sandbox inventory, deployed with the real pyinfra CLI on a provisioned host."""
    path = _inventory(tmp_path_factory.mktemp("inventory"), "plain.py")
    first_deploy(path)
    return path


def _runs(results: Path) -> list[dict]:
    paths = sorted(p for p in results.glob(f"{HOST}/*.json") if not p.name.startswith("base"))
    docs = [json.loads(p.read_text()) for p in paths]
    for doc in docs:
        validate_results(doc)
    return docs


def test_calibrate_writes_a_file_the_next_run_judges_with(inventory: Path, tmp_path: Path) -> None:
    cal_path = tmp_path / "sandbox-cpu.toml"
    results = tmp_path / "results"
    proc = gpufleet(
        "validate",
        str(inventory),
        "--calibrate",
        "--limit",
        HOST,
        "--runs",
        "2",
        "--output",
        str(cal_path),
        "--select",
        SELECT,
        "--results-dir",
        str(results),
        timeout=1500,
    )
    assert f"calibration written: {cal_path}" in proc.stdout
    runs = _runs(results)
    assert [d["tier"] for d in runs] == ["full", "full"]
    cal = calibration.load(cal_path)
    assert cal.is_cpu and cal.host == HOST
    # Every speed figure of both workloads is calibrated, with each run's own value, in order.
    assert {name.split(".")[0] for name in cal.figures} == {"mirrored", "xla"}
    assert "mirrored.scaling_efficiency" in cal.figures
    for name, figure in cal.figures.items():
        assert figure.values == pytest.approx([figures_from(d)[name] for d in runs], rel=1e-5)

    # A second run whose inventory names the file: the workloads get it, the results say so.
    judged = _inventory(tmp_path, "calibrated.py", calibration_file=str(cal_path))
    second = tmp_path / "second"
    proc = gpufleet(
        "validate",
        str(judged),
        "--tier",
        "full",
        "--select",
        SELECT,
        "--results-dir",
        str(second),
        timeout=900,
    )
    (doc,) = _runs(second)
    assert doc["spec"]["calibration_file"] == str(cal_path)
    for workload in doc["workloads"]:
        mine = [n for n in cal.figures if n.startswith(f"{workload['workload']}.")]
        assert mine, f"no calibrated figure of {workload['workload']}"
        for name in mine:
            floor = workload["config"]["floors"][name]
            assert floor["origin"].startswith(f"calibration ({cal_path}: median")
            expected = cal.figures[name].median * cal.figures[name].margin
            assert floor["value"] == pytest.approx(expected, abs=1e-3)
    assert "floors and their origins" in proc.stdout and "calibration" in proc.stdout

    # The same file for a host declared a GPU server: refused before anything runs on it.
    gpu_host = _inventory(tmp_path, "gpu.py", calibration_file=str(cal_path), gpu_less=False)
    proc = gpufleet(
        "validate",
        str(gpu_host),
        "--tier",
        "full",
        "--results-dir",
        str(tmp_path / "third"),
        check=False,
        timeout=300,
    )
    assert proc.returncode == 2
    (refused,) = _runs(tmp_path / "third")
    assert "holds CPU figures" in (refused["run_error"] or "")
