"""validation.periodic: the on-host runner writes a valid results document and a parsable .prom.

Most tests replay recorded real workload documents (tests/fixtures/results/workloads/, from
`python -m validation.workloads.<name> --quick --json` on a GPU-less machine) through a
stand-in interpreter, so that they run in seconds; one test runs a real workload.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.report.schema import validate_results
from validation.periodic import checks as periodic_checks
from validation.periodic import runner as periodic
from validation.verdicts.tiers import QUICK_WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "results" / "workloads"
NVIDIA_SMI = ROOT / "tests" / "fixtures" / "nvidia_smi"

# Stands in for the environment's Python: `-m validation.workloads.NAME --json PATH ...`
# copies the recorded document of NAME to PATH; REPLAY_<NAME>=crash|hang misbehaves instead.
# `-m validation.workloads.bundle --json-dir DIR --workloads a,b` does so for each in turn
# into DIR/<name>.json (a crash ends the process, as a crashed interpreter would).
REPLAY = """#!{python}
import json, os, shutil, sys, time
args = sys.argv[1:]
name = args[1].rsplit(".", 1)[1]
with open(os.environ["REPLAY_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
names, out = [name], None
if name == "bundle":
    names = args[args.index("--workloads") + 1].split(",")
    out = args[args.index("--json-dir") + 1]
for name in names:
    mode = os.environ.get("REPLAY_" + name.upper(), "")
    print(f"step=import {{name}}", file=sys.stderr)
    if mode == "crash":
        print("Traceback: ImportError: libcudart.so.12", file=sys.stderr)
        sys.exit(1)
    if mode == "hang":
        time.sleep(30)
    target = os.path.join(out, name + ".json") if out else args[args.index("--json") + 1]
    shutil.copy(os.path.join({recorded!r}, name + ".json"), target)
"""


@pytest.fixture
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "replay-python"
    script.write_text(REPLAY.format(python=sys.executable, recorded=str(RECORDED)))
    script.chmod(0o755)
    monkeypatch.setenv("REPLAY_LOG", str(tmp_path / "replay.log"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi unless a test adds one
    (tmp_path / "bin").mkdir()
    return script


def fake_nvidia_smi(tmp_path: Path, xml: Path | None, exit_status: int = 0) -> None:
    """nvidia-smi that prints a recorded real `nvidia-smi -q -x` (or fails like a lost driver)."""
    tool = tmp_path / "bin" / "nvidia-smi"
    if xml is not None:
        body = f"exec /bin/cat {xml}"
    else:
        body = (
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
            f'driver."; exit {exit_status}'
        )
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)


def parse_prom(path: Path) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(path.read_text())}


def run(tmp_path: Path, replay: Path, *extra: str) -> int:
    return periodic.main(
        [
            "--out",
            str(tmp_path / "out"),
            "--textfile-dir",
            str(tmp_path / "prom"),
            "--python",
            str(replay),
            *extra,
        ]
    )


def latest(tmp_path: Path) -> dict:
    doc: dict = json.loads((tmp_path / "out" / "latest.json").read_text())
    validate_results(doc)
    return doc


def test_the_quick_tier_runs_its_workloads_in_one_process(tmp_path: Path, replay: Path) -> None:
    assert run(tmp_path, replay) == 0
    calls = [json.loads(line) for line in (tmp_path / "replay.log").read_text().splitlines()]
    assert [c[1] for c in calls] == ["validation.workloads.bundle"]
    assert calls[0][calls[0].index("--workloads") + 1] == ",".join(QUICK_WORKLOADS)
    doc = latest(tmp_path)
    assert [w["workload"] for w in doc["workloads"]] == list(QUICK_WORKLOADS)


def test_quick_tier_writes_results_latest_and_prom(tmp_path: Path, replay: Path) -> None:
    assert run(tmp_path, replay) == 0
    doc = latest(tmp_path)
    results = list((tmp_path / "out" / "results").glob("*.json"))
    assert [p.name for p in results] == [f"{doc['run_id']}.json"]
    assert json.loads(results[0].read_text()) == doc
    assert [w["workload"] for w in doc["workloads"]] == list(QUICK_WORKLOADS)
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert {statuses[f"workloads::{n}"] for n in QUICK_WORKLOADS} == {"pass"}
    assert statuses["gpu_health::no_uncorrectable_ecc"] == "skipped"  # no nvidia-smi here
    calls = [json.loads(line) for line in (tmp_path / "replay.log").read_text().splitlines()]
    assert all("--quick" in call for call in calls)
    metrics = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    assert metrics["gpufleet_run_success"][0].value == 1
    success = metrics["gpufleet_last_success_timestamp_seconds"][0].value
    assert success == metrics["gpufleet_last_run_timestamp_seconds"][0].value > 0


def test_thresholds_from_expectations_reach_the_workloads(tmp_path: Path, replay: Path) -> None:
    expectations = tmp_path / "expectations.json"
    expectations.write_text(
        json.dumps(
            {
                "expectations_version": 1,
                "host": "gpu-a",
                "host_data": {"thresholds": {"xla_speedup_min": 1.3}, "gpu_less": True},
            }
        )
    )
    assert run(tmp_path, replay, "--expectations", str(expectations), "--workloads", "xla") == 0
    call = json.loads((tmp_path / "replay.log").read_text().splitlines()[0])
    assert json.loads(call[call.index("--thresholds") + 1]) == {"xla_speedup_min": 1.3}
    assert latest(tmp_path)["host"] == "gpu-a"


def test_a_crashed_workload_is_an_error_and_last_success_is_kept(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(tmp_path, replay, "--workloads", "xla") == 0
    before = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    monkeypatch.setenv("REPLAY_XLA", "crash")
    assert run(tmp_path, replay, "--workloads", "xla,gemm") == 1
    doc = latest(tmp_path)
    check = next(c for c in doc["checks"] if c["name"] == "workloads::xla")
    assert check["status"] == "error"
    assert "libcudart.so.12" in check["message"]  # the log's tail says why
    after = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    assert after["gpufleet_run_success"][0].value == 0
    kept = after["gpufleet_last_success_timestamp_seconds"][0].value
    assert kept == before["gpufleet_last_success_timestamp_seconds"][0].value > 0
    state = json.loads((tmp_path / "out" / "state.json").read_text())
    assert state["last_status"] == "fail" and state["last_success_timestamp"] == kept


def test_a_hung_workload_is_killed(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_GEMM", "hang")
    assert run(tmp_path, replay, "--workloads", "gemm", "--timeout", "1") == 1
    check = next(c for c in latest(tmp_path)["checks"] if c["name"] == "workloads::gemm")
    assert check["status"] == "error" and "killed after 1 s" in check["message"]


def test_gpu_health_from_recorded_nvidia_smi(tmp_path: Path, replay: Path) -> None:
    fake_nvidia_smi(tmp_path, NVIDIA_SMI / "tesla-t4-515.xml")
    expectations = tmp_path / "e.json"
    expectations.write_text(json.dumps({"expectations_version": 1, "host_data": {"gpu_count": 4}}))
    args = ("--workloads", "xla", "--expectations", str(expectations))
    assert run(tmp_path, replay, *args) == 1
    doc = latest(tmp_path)
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses["gpu_health::gpu_count"] == "fail"  # the T4 report has one GPU, not 4
    assert statuses["gpu_health::no_uncorrectable_ecc"] == "pass"
    assert statuses["gpu_health::clocks_not_throttled_under_load"] == "skipped"
    assert doc["gpu_health"]["gpus"][0]["name"] == "Tesla T4"
    metrics = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    assert metrics["gpufleet_gpu_count"][0].value == 1
    assert {s.labels["name"] for s in metrics["gpufleet_gpu_temperature_celsius"]} == {"Tesla T4"}


def test_driver_gone_fails_gpu_health(tmp_path: Path, replay: Path) -> None:
    fake_nvidia_smi(tmp_path, None, exit_status=9)
    assert run(tmp_path, replay, "--workloads", "xla") == 1
    check = next(c for c in latest(tmp_path)["checks"] if c["name"] == "gpu_health::gpu_count")
    assert check["status"] == "fail" and "exited 9" in check["message"]


def fake_pci_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *classes: str) -> None:
    """A sysfs PCI device folder holding NVIDIA functions of these classes (e.g. 0x030200)."""
    bus = tmp_path / "pci"
    for index, pci_class in enumerate(("0x060400", *classes)):
        device = bus / f"0000:{index:02x}:00.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text("0x8086\n" if index == 0 else "0x10de\n")
        (device / "class").write_text(f"{pci_class}\n")
    monkeypatch.setattr(periodic_checks, "PCI_DEVICES", bus)


def gpu_less_expectations(tmp_path: Path) -> Path:
    expectations = tmp_path / "e.json"
    expectations.write_text(
        json.dumps({"expectations_version": 1, "host_data": {"gpu_less": True}})
    )
    return expectations


def test_gpu_less_host_without_gpu_skips_gpu_health_with_driver_tools_installed(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, None, exit_status=9)  # installed, no driver to talk to
    fake_pci_bus(tmp_path, monkeypatch, "0x068000")  # an NVSwitch-class function is no GPU
    args = ("--workloads", "xla", "--expectations", str(gpu_less_expectations(tmp_path)))
    assert run(tmp_path, replay, *args) == 0
    checks = {c["name"]: c for c in latest(tmp_path)["checks"]}
    assert checks["gpu_health::gpu_count"]["status"] == "skipped"
    assert "no NVIDIA GPU on the PCI bus" in checks["gpu_health::gpu_count"]["message"]


def test_gpu_less_host_with_a_gpu_on_the_bus_checks_it(
    tmp_path: Path, replay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, None, exit_status=9)
    fake_pci_bus(tmp_path, monkeypatch, "0x030200")
    args = ("--workloads", "xla", "--expectations", str(gpu_less_expectations(tmp_path)))
    assert run(tmp_path, replay, *args) == 1
    check = next(c for c in latest(tmp_path)["checks"] if c["name"] == "gpu_health::gpu_count")
    assert check["status"] == "fail" and "exited 9" in check["message"]


def test_missing_nvidia_smi_fails_when_gpus_are_expected(tmp_path: Path, replay: Path) -> None:
    expectations = tmp_path / "e.json"
    expectations.write_text(json.dumps({"expectations_version": 1, "host_data": {"gpu_count": 8}}))
    assert run(tmp_path, replay, "--workloads", "xla", "--expectations", str(expectations)) == 1
    check = next(c for c in latest(tmp_path)["checks"] if c["name"] == "gpu_health::gpu_count")
    assert check["status"] == "fail" and "8 GPU(s) are expected" in check["message"]


def test_bad_expectations_still_publish_an_error(tmp_path: Path, replay: Path) -> None:
    bad = tmp_path / "e.json"
    bad.write_text('{"host": "x"}')
    assert run(tmp_path, replay, "--expectations", str(bad)) == 2
    doc = latest(tmp_path)
    assert doc["status"] == "error" and "not an expectations document" in doc["run_error"]
    metrics = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    assert metrics["gpufleet_run_error"][0].value == 1


def test_unknown_workload_is_refused_with_the_choices(tmp_path: Path, replay: Path) -> None:
    assert run(tmp_path, replay, "--workloads", "xla,bogus") == 2
    assert "choose from resnet50, bert_large, mirrored" in latest(tmp_path)["run_error"]


def test_finding14_only_the_runners_own_old_results_are_pruned(
    tmp_path: Path, replay: Path
) -> None:
    results = tmp_path / "out" / "results"
    results.mkdir(parents=True)
    # Not the runner's own files (security audit 14): a shared results folder keeps them.
    foreign = [results / "baseline.json", results / "inventory.json", results / "0-notes.json"]
    for path in foreign:
        path.write_text("{}")
    for _ in range(3):
        run(tmp_path, replay, "--workloads", "xla", "--keep", "2")
    own = [p for p in results.glob("*.json") if p not in foreign]
    assert len(own) == 2
    assert all(path.exists() for path in foreign)


def test_periodic_runs_gather_their_tier_baseline_then_publish_regressions(
    tmp_path: Path, replay: Path
) -> None:
    from gpufleet.validate.baseline import RUNS_WANTED
    from validation.periodic.baseline import regression_state

    out = tmp_path / "out"
    results = out / "results"
    (out / "results").mkdir(parents=True)
    gpu = [w for w in ff_gpu_workloads() if w["workload"] == "xla"]
    # The recorded CPU documents have no applicable figure; stand-in GPU documents do.
    for hour in range(RUNS_WANTED["quick"]):
        doc = ff_document(hour, gpu, xla=1.42 * (1 + 0.01 * ((hour % 3) - 1)))
        state = regression_state(doc, out, results)
        (results / f"{doc['run_id']}.json").write_text(json.dumps(doc))
    assert state["state"] == "ok" and state["runs"] == RUNS_WANTED["quick"]
    assert (out / "baseline-quick.json").is_file() and not (out / "baseline.json").exists()
    for hour in range(30, 33):
        doc = ff_document(hour, gpu, xla=1.42 * 0.85)  # a sustained 15 % drop
        (results / f"{doc['run_id']}.json").write_text(json.dumps(doc))
        state = regression_state(doc, out, results)
    assert state["state"] == "regressed"
    assert state["figures"]["xla/speedup"]["status"] == "regressed"
    from gpufleet.report import prometheus

    text = prometheus.render(doc, regression=state)
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    states = {s.labels["state"]: s.value for s in families["gpufleet_regression_state"]}
    assert states == {"gathering": 0.0, "ok": 0.0, "regressed": 1.0}
    (flag,) = families["gpufleet_figure_regressed"]
    # figure: the dotted name of an older gpufleet's XLA figure (gpufleet.floors.names)
    assert flag.labels == {"figure": "xla.speedup", "key": "xla/speedup"} and flag.value == 1.0


def test_the_textfile_shows_a_gathering_baseline(tmp_path: Path, replay: Path) -> None:
    assert run(tmp_path, replay, "--workloads", "xla") == 0
    families = parse_prom(tmp_path / "prom" / "gpufleet.prom")
    states = {s.labels["state"]: s.value for s in families["gpufleet_regression_state"]}
    assert states["gathering"] == 1.0
    state = json.loads((tmp_path / "out" / "state.json").read_text())
    assert state["regression"]["state"] == "gathering"


def ff_gpu_workloads() -> list[dict]:
    from tests.unit import fleet_factory as ff

    return ff.gpu_workloads()


def ff_document(hour: int, workloads: list[dict], *, xla: float) -> dict:
    from tests.unit import fleet_factory as ff

    work = json.loads(json.dumps(workloads))
    work[0]["metrics"]["speedup"] = xla
    day, hour = 1 + hour // 24, hour % 24
    doc = ff.document("gpu-a", started_at=ff.when(day, hour), workloads=work, tier="quick")
    # periodic's own file names: <UTC time>-<6 hex>
    return {**doc, "run_id": doc["run_id"][:16] + f"-{hour:06x}"}


def test_runs_on_a_host_without_the_control_node_packages() -> None:
    """The hosts' environments have TensorFlow, not pyinfra, rich, jinja2 or pytest."""
    probe = (
        "import sys, validation.periodic.runner, gpufleet.validate.baseline\n"
        "import gpufleet.parsers.nvidia_smi\n"
        "heavy = {'pyinfra', 'rich', 'jinja2', 'pytest', 'matplotlib', 'tensorflow'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
