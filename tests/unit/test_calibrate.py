"""`gpufleet validate --calibrate`: refusals, the file it writes, and that file read back."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from gpufleet.commands import thresholds as thresholds_cmd
from gpufleet.commands import validate as validate_cmd
from gpufleet.floors import calibration
from gpufleet.floors.derived import FloorError, floors_for
from gpufleet.floors.show import host_floors
from gpufleet.inventory import InventoryHost
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.validate import calibfile, calibrate
from validation.test_workloads import workload_command
from validation.workloads._floors import load_floors
from validation.workloads._run import Run, WorkloadError

A100 = "NVIDIA A100-SXM4-40GB"
HOST = InventoryHost("gpu01", "ssh", "10.0.0.1")


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    argv = ["inv.py", "--calibrate", "--results-dir", str(tmp_path / "results"), *extra]
    return validate_cmd.build_parser().parse_args(argv)


def _gpu_workload(amp: float, scaling: float) -> dict:
    gpus = [{"type": "GPU", "name": f"/device:GPU:{i}", "model": A100} for i in range(8)]
    kind = {"gpu_model": A100, "gpu_count": 8, "interconnect": "nvlink"}
    return {
        "workload": "resnet50",
        "devices": gpus,
        "config": {"host_kind": kind},
        "metrics": {
            "resnet50.images_per_s.amp": {str(i): amp + i for i in range(8)},
            "mirrored.scaling_efficiency": scaling,
            "loss_max_relative_difference": 1e-7,  # no floor: not calibrated
        },
        "checks": [],
    }


def _cpu_workload(speedup: float) -> dict:
    check = {
        "name": "xla_speedup",
        "kind": "speed",
        "status": "not_applicable",
        "evidence": {"type": "pairs", "metric": "speedup", "invert": False},
    }
    return {
        "workload": "xla",
        "devices": [{"type": "CPU", "name": "/device:CPU:0"}],
        "config": {},
        "metrics": {"speedup": speedup, "speedup_ci": [1.0, 1.5], "hlo_fusion_mentions": 217},
        "checks": [check],
    }


def _document(workloads: list[dict], status: str = "pass") -> dict:
    return {"host": "gpu01", "status": status, "checks": [], "workloads": workloads}


@pytest.fixture
def fake_runs(monkeypatch):
    """calibrate with the inventory and the runs replaced: each run gives the next document."""
    queue: list[dict] = []
    monkeypatch.setattr(calibrate, "load_hosts", lambda inventory, limits: [HOST])
    monkeypatch.setattr(calibrate, "run_hosts", lambda args, hosts, run_id: [queue.pop(0)])
    return queue


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "exactly one --limit HOST"),
        (("--limit", "a", "--limit", "b"), "exactly one --limit HOST"),
        (("--limit", "gpu01", "--runs", "1"), "at least 2 runs"),
        (("--limit", "gpu01", "--tier", "quick"), "runs the full tier"),
        (("--limit", "gpu01", "--margin", "1.5"), "must be in (0, 1]"),
    ],
)
def test_calibrate_refuses_what_it_cannot_do_with_the_fix(tmp_path, capsys, extra, message):
    assert validate_cmd.main(["inv.py", "--calibrate", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_limit_selecting_two_hosts_is_refused(tmp_path, capsys, monkeypatch):
    other = InventoryHost("gpu02", "ssh", "10.0.0.2")
    monkeypatch.setattr(calibrate, "load_hosts", lambda inventory, limits: [HOST, other])
    assert calibrate.run(_args(tmp_path, "--limit", "gpu*")) == 2
    assert "selects 2 hosts (gpu01, gpu02); name exactly one host" in capsys.readouterr().err


def test_an_existing_output_is_refused_before_any_run_without_force(tmp_path, capsys, fake_runs):
    out = tmp_path / "mine.toml"
    out.write_text("kept")
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01", "--output", str(out))) == 2
    assert "pass --force" in capsys.readouterr().err and out.read_text() == "kept"


def test_gpu_calibration_writes_the_kind_file_and_its_floors_read_back(
    tmp_path, capsys, fake_runs, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    fake_runs += [_document([_gpu_workload(a, s)]) for a, s in ((2000, 0.9), (2100, 0.92))]
    fake_runs.append(_document([_gpu_workload(2200, 0.88)]))
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01")) == 0
    out = capsys.readouterr().out
    path = Path("calibration/nvidia-a100-sxm4-40gb-8x-nvswitch.toml")
    assert f"calibration written: {path}" in out
    cal = calibration.load(path)
    assert (cal.gpu_model, cal.gpu_count, cal.interconnect) == (A100, 8, "nvswitch")
    # Per-GPU figures: each run's median over the GPUs (2003.5 ...); no floor-less figure.
    assert cal.figures["resnet50.images_per_s.amp"].values == (2003.5, 2103.5, 2203.5)
    assert set(cal.figures) == {"resnet50.images_per_s.amp", "mirrored.scaling_efficiency"}
    floors = {
        f.name: f
        for f in calibration.apply(floors_for(A100, 8, "nvswitch"), cal, A100, 8, "nvswitch")
    }
    assert floors["resnet50.images_per_s.amp"].value == pytest.approx(0.9 * 2103.5, abs=0.01)
    assert floors["resnet50.images_per_s.amp"].origin.startswith(f"calibration ({path}")
    # The summary names the published floor it replaces (0.80 x DLE's 2375 = 1900).
    assert ">= 1900" in out and ">= 1893" in out


def test_an_existing_default_file_is_kept_and_the_new_one_written_beside_it(
    tmp_path, capsys, fake_runs, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    target = Path("calibration/cpu-0x-none.toml")
    target.parent.mkdir()
    target.write_text("reviewed")
    fake_runs += [_document([_cpu_workload(v)]) for v in (1.2, 1.3)]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01", "--runs", "2")) == 0
    assert target.read_text() == "reviewed"
    written = [p for p in target.parent.iterdir() if p != target]
    assert len(written) == 1 and calibration.load(written[0]).is_cpu
    assert "not overwritten without --force" in capsys.readouterr().out
    fake_runs += [_document([_cpu_workload(v)]) for v in (1.2, 1.3)]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01", "--runs", "2", "--force")) == 0
    assert calibration.load(target).figures["xla.speedup"].values == (1.2, 1.3)


def test_a_cpu_calibration_judges_only_gpu_less_hosts(tmp_path, fake_runs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_runs += [_document([_cpu_workload(v)]) for v in (1.2, 1.3, 1.25)]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01")) == 0
    path = Path("calibration/cpu-0x-none.toml")
    data = calibration.read_data(path)
    assert set(calibration.parse(data).figures) == {"xla.speedup"}  # speed checks' figures only
    # A GPU-less run of the workload: the floor comes from the file, and says so.
    cpu_run = Run(workload="xla", args=argparse.Namespace(quick=False))
    load_floors(cpu_run, data)
    assert cpu_run.config["floors"]["xla.speedup"]["origin"].startswith(f"calibration ({path}")
    assert cpu_run.config["floors"]["xla.speedup"]["value"] == pytest.approx(0.9 * 1.25)
    # A GPU host given the CPU file: refused in the workload, whatever its kind.
    gpu_run = Run(workload="xla", args=argparse.Namespace(quick=False))
    gpu_run.gpus, gpu_run.gpu_model = ["/device:GPU:0"], A100
    with pytest.raises(WorkloadError, match="calibrates a GPU-less host"):
        load_floors(gpu_run, data)
    with pytest.raises(FloorError, match="not NVIDIA A100-SXM4-40GB x1"):
        calibration.apply(
            floors_for(A100, 1, "single_gpu"), calibration.load(path), A100, 1, "single_gpu"
        )


def test_a_non_finite_figure_makes_no_floor(tmp_path, fake_runs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_runs += [_document([_cpu_workload(v)]) for v in (1.2, float("nan"), float("inf"))]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01")) == 0
    cal = calibration.load("calibration/cpu-0x-none.toml")
    assert cal.figures["xla.speedup"].values == (1.2,)


def test_a_failing_run_is_not_a_known_good_host(tmp_path, capsys, fake_runs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = _document([_cpu_workload(1.2)], status="fail")
    bad["checks"] = [{"name": "gpu_health::ecc", "status": "fail"}]
    fake_runs += [_document([_cpu_workload(1.2)]), bad]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01")) == 2
    assert "is 'fail' (gpu_health::ecc)" in capsys.readouterr().err
    assert not Path("calibration").exists()


def test_runs_of_different_kinds_are_refused(tmp_path, capsys, fake_runs):
    other = _gpu_workload(2000, 0.9)
    other["config"]["host_kind"] = {"gpu_model": A100, "gpu_count": 4, "interconnect": "nvlink"}
    fake_runs += [_document([_gpu_workload(2000, 0.9)]), _document([other])]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01", "--runs", "2")) == 2
    assert "different host kinds" in capsys.readouterr().err


def test_gpus_without_a_known_kind_are_not_calibrated_as_cpu(tmp_path, capsys, fake_runs):
    unknown = _gpu_workload(2000, 0.9)
    del unknown["config"]["host_kind"]
    fake_runs += [_document([unknown]), _document([unknown])]
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01", "--runs", "2")) == 2
    assert "add the model to gpufleet/matrix/gpus.py" in capsys.readouterr().err


# ------------------------------------------------------------- the inventory's calibration_file


def _write_cpu_file(tmp_path: Path) -> Path:
    text = calibfile.render(
        ("cpu", 0, "none"),
        host="sandbox-1",
        date="2026-12-01",
        margin=0.9,
        figures=[calibfile.FigureRuns("xla.speedup", (1.2, 1.3), "", "min", None)],
        run_ids=["r1", "r2"],
    )
    path = tmp_path / "cpu.toml"
    path.write_text(text)
    return path


def test_calibration_file_is_read_on_the_control_node_its_floors_for_the_full_tier_only(
    tmp_path,
):
    path = _write_cpu_file(tmp_path)
    spec = NodeSpec.from_host_data({"gpu_less": True, "calibration_file": str(path)})
    data = calibfile.calibration_for(spec, "full")
    assert data is not None and data["path"] == str(path) and data["gpu_model"] == "cpu"
    assert "spreads_only" not in data
    # The quick tier gets the file's spreads only (issue 32 item 2), never its floors.
    quick = calibfile.calibration_for(spec, "quick")
    assert quick == data | {"spreads_only": True}


@pytest.mark.parametrize(
    ("data", "content", "message"),
    [
        ({"gpu_less": True}, None, "cannot read calibration file"),
        ({"gpu_less": True}, "schema = [", "is not valid TOML"),
        ({"gpu_less": True}, "schema = 1\nnope = 2", "missing key(s)"),
        ({}, "CPU", "can judge only a GPU-less host"),
        ({"gpu_less": True}, "A100", "declared gpu_less"),
        ({"gpu_count": 4}, "A100", "declares gpu_count = 4"),
    ],
)
def test_a_bad_calibration_file_is_refused_naming_the_key_and_fix(tmp_path, data, content, message):
    path = tmp_path / "c.toml"
    if content == "CPU":
        path = _write_cpu_file(tmp_path)
    elif content == "A100":
        path.write_text(
            f'schema = 1\ngpu_model = "{A100}"\ngpu_count = 8\ninterconnect = "nvswitch"\n'
            '[figures."mirrored.scaling_efficiency"]\nvalues = [0.9, 0.91]\n'
        )
    elif content is not None:
        path.write_text(content)
    spec = NodeSpec.from_host_data({**data, "calibration_file": str(path)})
    with pytest.raises(SpecError, match="calibration_file") as caught:
        calibfile.calibration_for(spec, "full")
    assert message in str(caught.value)


@pytest.mark.parametrize("value", ["../c.toml", "/a/./c.toml", "c.txt", "a b.toml", "a//c.toml"])
def test_calibration_file_key_has_a_strict_format(value):
    with pytest.raises(SpecError, match=r"is not a plain path to a \.toml file"):
        NodeSpec.from_host_data({"calibration_file": value})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"extra": 1}, "unknown key(s) extra"),
        ({"gpu_model": "cpu", "gpu_count": 8}, "goes with gpu_count = 0"),
        ({"figures": {"xla.speedup": {"values": [1.0], "floor": 2}}}, "unknown key(s) floor"),
        ({"figures": {"xla.speedup": {"values": [1.0], "bound": "up"}}}, "bound 'min' or 'max'"),
    ],
)
def test_calibration_documents_are_checked_strictly(edit, message):
    data = {"schema": 1, "gpu_model": "cpu", "gpu_count": 0, "interconnect": "none"}
    data["figures"] = {"xla.speedup": {"values": [1.2]}}
    with pytest.raises(FloorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calibration.parse({**data, **edit})


def test_the_workload_command_hands_the_calibration_over_intact(tmp_path):
    data = calibration.read_data(_write_cpu_file(tmp_path))
    data["host"] = 'it\'s "quoted" $(rm -rf /)'
    command = workload_command(
        "xla",
        python="/env/bin/python",
        payload_dir="/opt/p",
        quick=False,
        thresholds={},
        timeout_s=60,
        calibration=data,
    )
    words = shlex.split(command)
    assert json.loads(words[words.index("--calibration") + 1]) == data
    plain = workload_command(
        "xla", python="p", payload_dir="/d", quick=True, thresholds={}, timeout_s=5
    )
    assert "--calibration" not in plain


# ----------------------------------------------- gpufleet thresholds: the same floors as the hosts


def test_thresholds_shows_a_cpu_calibrations_floors_and_judges_with_them(tmp_path, capsys):
    path = _write_cpu_file(tmp_path)
    cpu = ["--gpu-model", "cpu", "--gpu-count", "0", "--interconnect", "none"]
    assert thresholds_cmd.main([*cpu]) == 2
    assert "only from a calibration file" in capsys.readouterr().err
    assert thresholds_cmd.main([*cpu, "--calibration", str(path), "--json"]) == 0
    (floor,) = json.loads(capsys.readouterr().out)
    assert floor["name"] == "xla.speedup" and floor["origin"].startswith("calibration")
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps({"workload": "xla", "metrics": {"speedup": 1.0}}))
    assert thresholds_cmd.main([*cpu, "--calibration", str(path), "--judge", str(figures)]) == 1
    assert "FAIL  xla.speedup" in capsys.readouterr().out


def test_thresholds_and_the_workloads_derive_the_same_calibrated_floors(tmp_path):
    path = tmp_path / "a100.toml"
    figures = [
        calibfile.FigureRuns(
            "resnet50.images_per_s.amp", (2000.0, 2100.0, 2150.0), "", "min", None
        ),
        calibfile.FigureRuns("mirrored.gpu_utilization_spread_pct", (4.0, 6.0), "%", "max", None),
    ]
    kind = (A100, 8, "nvswitch")
    path.write_text(
        calibfile.render(kind, host="g", date="d", margin=0.85, figures=figures, run_ids=["r"])
    )
    args = thresholds_cmd.build_parser().parse_args(
        [
            "--gpu-model",
            A100,
            "--gpu-count",
            "8",
            "--interconnect",
            "nvswitch",
            "--calibration",
            str(path),
        ]
    )
    shown = {f.name: f for f in host_floors(args)}
    run = Run(workload="resnet50", args=argparse.Namespace(quick=False))
    run.gpus, run.gpu_model = [f"/device:GPU:{i}" for i in range(8)], A100
    run.config["topology"] = {"name": "nvlink", "reason": "test"}
    load_floors(run, calibration.read_data(path))
    assert shown == run.floors
    assert shown["resnet50.images_per_s.amp"].value == pytest.approx(0.85 * 2100.0)
    assert shown["mirrored.gpu_utilization_spread_pct"].value == pytest.approx(5.0 / 0.85, abs=1e-3)


def _speed_failed_workload() -> dict:
    doc = _gpu_workload(1700, 0.9)
    doc["checks"] = [
        {"name": "trains_amp", "kind": "correctness", "status": "pass"},
        {"name": "throughput_amp", "kind": "speed", "status": "fail"},
    ]
    return doc


def test_a_run_whose_only_failures_are_speed_checks_calibrates(tmp_path, capsys, fake_runs):
    # Review 2, N9: the old code refused any run with status fail, so a floor that sits above
    # a healthy host could never be replaced by calibration.
    out = tmp_path / "cal.toml"
    for _ in range(2):
        bad = _document([_speed_failed_workload()], status="fail")
        bad["checks"] = [{"name": "workloads::resnet50", "status": "fail"}]
        fake_runs.append(bad)
    args = _args(tmp_path, "--limit", "gpu01", "--runs", "2", "--output", str(out))
    assert calibrate.run(args) == 0, capsys.readouterr().err
    assert "only speed checks failed" in capsys.readouterr().out
    cal = calibration.load(out)
    assert cal.figures["resnet50.images_per_s.amp"].values == (1703.5, 1703.5)


@pytest.mark.parametrize(
    ("kind", "checks", "top", "message"),
    [
        ("correctness", True, "fail", "workloads::resnet50 (trains_amp)"),
        ("speed", False, "fail", "crashed: no checks"),
        ("speed", True, "error", "workloads::resnet50"),
    ],
)
def test_correctness_crashes_and_errors_still_refuse(
    tmp_path, capsys, fake_runs, kind, checks, top, message
):
    workload = _gpu_workload(1700, 0.9)
    if checks:
        workload["checks"] = [{"name": "trains_amp", "kind": kind, "status": "fail"}]
    bad = _document([workload], status="fail")
    bad["checks"] = [{"name": "workloads::resnet50", "status": top}]
    fake_runs.append(bad)
    assert calibrate.run(_args(tmp_path, "--limit", "gpu01")) == 2
    assert message in capsys.readouterr().err
