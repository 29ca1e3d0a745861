"""Floors by construction: healthy published figures pass every floor, degraded ones fail the
check meant to catch them (issue 13 items 1, 8, 9)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.cli import main as cli_main
from gpufleet.floors import references as refs
from gpufleet.floors.checks import judge, outliers, utilization_balance
from gpufleet.floors.derived import FloorError, floors_for, known_models
from gpufleet.matrix.gpus import GPUS
from validation.verdicts.thresholds import load_thresholds

EIGHT = [str(i) for i in range(8)]

# The multi-GPU kind each model with published figures is tested as (and always 1 GPU too).
MULTI = {
    "Tesla V100-SXM2-16GB": (8, "nvlink_partial"),  # DGX-1 hybrid cube-mesh
    "Tesla V100-SXM2-32GB": (8, "nvlink_partial"),
    "NVIDIA A100-SXM4-40GB": (8, "nvswitch"),
    "NVIDIA A100-SXM4-80GB": (8, "nvswitch"),
    "NVIDIA A100-PCIE-40GB": (2, "pcie_switch"),
    "NVIDIA A100 80GB PCIe": (2, "pcie_switch"),
    "NVIDIA H100 80GB HBM3": (8, "nvswitch"),
    "NVIDIA H200": (8, "nvswitch"),
    "NVIDIA L4": (2, "pcie_host_bridge"),
    "Tesla T4": (2, "pcie_host_bridge"),
}
# Healthy TF-path all-reduce busbw, the low end of the review's predicted range per class
# (workload-gpu-review.md section 1 and defect 13); the TF path has no published figure.
# PCIe classes: the review's 2x T4 range, 4-11 GB/s, without P2P (PHB) at 5, with P2P (PIX) at 8.
HEALTHY_BUSBW = {
    "nvlink_partial": 90.0,
    "nvswitch": 170.0,
    "pcie_switch": 8.0,
    "pcie_host_bridge": 5.0,
}
HEALTHY_BUSBW_H100 = 280.0

PUBLISHED_MODELS = sorted({g for r in refs.ALL if r.value is not None for g in r.gpus})
KINDS = [(m, 1, "single_gpu") for m in PUBLISHED_MODELS] + [
    (m, *MULTI[m]) for m in PUBLISHED_MODELS
]


def model_named(name: str):
    return next(m for m in GPUS.values() if m.name == name)


def healthy(model: str, count: int, interconnect: str) -> dict[str, object]:
    """A healthy host's figures, built only from the published table (and the review's busbw)."""
    gpus = [str(i) for i in range(count)]
    figs: dict[str, object] = {}
    for ref in refs.references_for(model):
        if ref.value is None:
            continue
        if ref.unit in ("images/s", "sequences/s") and ref.gpu_count == 1:
            figs[ref.figure] = dict.fromkeys(gpus, ref.value)
        elif ref.figure.startswith("gemm.fraction_of_peak."):
            precision = ref.figure.rsplit(".", 1)[1]
            figs[ref.figure] = dict.fromkeys(gpus, ref.value)
            peak = model_named(model).peak_tflops[precision]
            figs[f"gemm.tflops.{precision}"] = dict.fromkeys(gpus, ref.value * peak)
    amp = refs.published(model, "resnet50.images_per_s.amp")
    base = "tf32" if model_named(model).compute_capability >= (8, 0) else "fp32"
    flt = refs.published(model, f"resnet50.images_per_s.{base}")
    if amp and flt:
        figs["mixed_precision.speedup.fp16"] = amp.value / flt.value  # type: ignore[operator]
    if count > 1:
        scalings = [
            r8.value / r1.value  # type: ignore[operator,union-attr]
            for r8 in refs.THROUGHPUT
            if r8.gpu_count == 8
            and r8.figure.startswith("resnet50")
            and (r1 := refs.published(model, r8.figure)) is not None
            and model in r8.gpus
        ]
        if scalings:
            figs["mirrored.scaling_efficiency"] = min(scalings)
        figs["mirrored.gpu_utilization_pct"] = {g: 97.0 - int(g) for g in gpus}
        busbw = HEALTHY_BUSBW[interconnect]
        hopper = model_named(model).architecture == "Hopper"  # H200: the H100's NVLink 4 fabric
        figs["allreduce.busbw_gbps"] = HEALTHY_BUSBW_H100 if hopper else busbw
    figs["input_pipeline.device_busy_fraction"] = 0.96
    figs["pcie.link_width"] = dict.fromkeys(gpus, 16)
    figs["pcie.link_gen"] = dict.fromkeys(gpus, refs.PCIE_GEN[model])
    return figs


def failed(verdicts) -> set[str]:
    return {v.name for v in verdicts if v.passed is False}


@pytest.mark.parametrize(("model", "count", "interconnect"), KINDS)
def test_healthy_published_figures_pass_every_floor(model, count, interconnect):
    floors = floors_for(model, count, interconnect)
    verdicts = judge(floors, healthy(model, count, interconnect))
    assert failed(verdicts) == set()
    judged = {v.name.split("[")[0] for v in verdicts if v.passed}
    published = {f.name for f in floors if f.origin.startswith("published")}
    assert published <= judged, "every published floor must meet its healthy figure"


def _scale(figs: dict, prefix: str, factor: float) -> dict:
    out = dict(figs)
    for name, value in figs.items():
        if name.startswith(prefix):
            out[name] = (
                {g: v * factor for g, v in value.items()}
                if isinstance(value, dict)
                else value * factor
            )
    return out


GEMM_MODELS = sorted({g for r in refs.GEMM_MEASURED for g in r.gpus})


STEP_MODELS = sorted({(g, r.figure.split(".")[0]) for r in refs.THROUGHPUT for g in r.gpus})


@pytest.mark.parametrize(("model", "step"), STEP_MODELS)
def test_half_clocks_fail_the_throughput_floor(model, step):
    figs = healthy(model, 1, "single_gpu")
    names = [n for n in figs if n.startswith(step)]
    assert names
    bad = failed(judge(floors_for(model, 1, "single_gpu"), _scale(figs, step, 0.5)))
    assert {f"{n}[0]" for n in names} <= bad


@pytest.mark.parametrize("model", GEMM_MODELS)
def test_half_clocks_fail_the_gemm_floors(model):
    figs = _scale(healthy(model, 1, "single_gpu"), "gemm.", 0.5)
    bad = failed(judge(floors_for(model, 1, "single_gpu"), figs))
    for ref in refs.references_for(model, "gemm.fraction_of_peak."):
        precision = ref.figure.rsplit(".", 1)[1]
        assert {f"{ref.figure}[0]", f"gemm.tflops.{precision}[0]"} <= bad


@pytest.mark.parametrize("model", [m for m in MULTI if not MULTI[m][1].startswith("pcie")])
def test_nvlink_fallen_back_to_pcie_fails_the_allreduce_floor(model):
    count, interconnect = MULTI[model]
    figs = healthy(model, count, interconnect)
    figs["allreduce.busbw_gbps"] = 10.0  # review defect 12: 5-10 GB/s after the fallback
    assert failed(judge(floors_for(model, count, interconnect), figs)) == {"allreduce.busbw_gbps"}


def test_dgx1_nvlink_fallback_passes_todays_floor_and_fails_the_new_one():
    today = load_thresholds("7.0", "Tesla V100-SXM2-16GB", topology="nvlink_partial", gpu_count=8)
    fallen_back = 8.0
    assert fallen_back >= today["allreduce_busbw_min_gbps"]  # 3.0 today: passes broken NVLinks
    floors = floors_for("Tesla V100-SXM2-16GB", 8, "nvlink_partial")
    assert failed(judge(floors, {"allreduce.busbw_gbps": fallen_back})) == {"allreduce.busbw_gbps"}


@pytest.mark.parametrize("model", sorted(MULTI))
def test_a_pcie_link_at_x8_fails_naming_the_gpu(model):
    count, interconnect = MULTI[model]
    figs = healthy(model, count, interconnect)
    figs["pcie.link_width"] = {**figs["pcie.link_width"], "1": 8}  # type: ignore[dict-item]
    assert failed(judge(floors_for(model, count, interconnect), figs)) == {"pcie.link_width[1]"}


PER_GPU_MODELS = sorted({g for r in refs.THROUGHPUT + refs.GEMM_MEASURED for g in r.gpus})


@pytest.mark.parametrize("model", [m for m in PER_GPU_MODELS if MULTI[m][0] == 8])
def test_one_gpu_of_eight_20_percent_slow_is_named(model):
    count, interconnect = MULTI[model]
    figs = healthy(model, count, interconnect)
    for name, value in list(figs.items()):
        if isinstance(value, dict) and name.startswith(("resnet50", "bert_large", "gemm.")):
            figs[name] = {**value, "5": value["5"] * 0.8}
    floors = floors_for(model, count, interconnect)
    verdicts = judge(floors, figs)
    outlier_checks = [v for v in verdicts if v.name.endswith(".outliers")]
    assert outlier_checks and all(
        v.passed is False and "GPU(s) 5 (20% below)" in v.detail for v in outlier_checks
    )
    # Synchronous data parallelism runs at the slowest GPU's pace: scaling drops by 20 %.
    scaled = _scale(figs, "mirrored.scaling_efficiency", 0.8)
    if "mirrored.scaling_efficiency" in figs:
        assert "mirrored.scaling_efficiency" in failed(judge(floors, scaled))


@pytest.mark.parametrize("model", sorted(MULTI))
def test_model_outside_strategy_scope_fails_the_gpu_utilization_floors(model):
    count, interconnect = MULTI[model]
    figs = healthy(model, count, interconnect)
    figs["mirrored.gpu_utilization_pct"] = {g: (98.0 if g == "0" else 1.5) for g in EIGHT[:count]}
    bad = failed(judge(floors_for(model, count, interconnect), figs))
    idle = {f"mirrored.gpu_utilization_pct[{g}]" for g in EIGHT[1:count]}
    assert bad == idle | {"mirrored.gpu_utilization_spread_pct"}


@pytest.mark.parametrize("model", PUBLISHED_MODELS)
def test_starved_input_pipeline_fails_the_busy_floor(model):
    figs = {**healthy(model, 1, "single_gpu"), "input_pipeline.device_busy_fraction": 0.45}
    bad = failed(judge(floors_for(model, 1, "single_gpu"), figs))
    assert bad == {"input_pipeline.device_busy_fraction"}


def test_outliers_and_balance_functions():
    assert outliers({"0": 100, "1": 101, "2": 99, "3": 79}) == {"3": 0.206}  # median 99.5
    assert outliers({"0": 100, "1": 95, "2": 91}) == {}
    assert outliers({"0": 100, "1": 50}) == {}  # two GPUs: no meaningful median
    assert utilization_balance({"0": 95, "1": 90}, 80, 15).passed is True
    low = utilization_balance({"0": 99, "1": 81, "2": 60}, 80, 15)
    assert low.passed is False and "GPU(s) 2 below 80 %" in low.detail and "spread 39" in low.detail


def test_published_floors_are_margin_times_the_table():
    floors = {f.name: f for f in floors_for("NVIDIA A100-SXM4-40GB", 8, "nvswitch")}
    assert floors["resnet50.images_per_s.amp"].value == 1900.0  # 0.80 x 2375
    assert floors["mixed_precision.speedup.fp16"].value == round(2375 / 909 * 0.75, 2)
    assert floors["mirrored.scaling_efficiency"].value == round(17400 / 8 / 2375 * 0.85, 2)
    assert floors["allreduce.busbw_gbps"].value == 140.0  # 0.70 x nccl-tests 200
    v100 = {f.name: f for f in floors_for("Tesla V100-SXM2-16GB", 1, "single_gpu")}
    assert v100["mixed_precision.speedup.fp16"].value == round(1270 / 412 * 0.75, 2)
    assert "DGX-1 (8x V100 16G)" in v100["resnet50.images_per_s.fp32"].origin


def test_eight_gpus_all_nvlink_are_an_nvswitch_board():
    # validation/workloads/_topology.py reports an HGX board as "nvlink"
    assert floors_for("NVIDIA H100 80GB HBM3", 8, "nvlink") == floors_for(
        "NVIDIA H100 80GB HBM3", 8, "nvswitch"
    )
    four = {f.name: f for f in floors_for("NVIDIA A100-SXM4-40GB", 4, "nvlink")}
    assert four["allreduce.busbw_gbps"].value == 30.0


def test_unpublished_models_report_without_a_floor():
    for model in ("NVIDIA L4", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "Tesla T4"):
        floors = {f.name: f for f in floors_for(model, 1, "single_gpu")}
        amp = floors["resnet50.images_per_s.amp"]
        assert amp.value is None and "calibration" in amp.origin
        assert judge([amp], {amp.name: 1.0})[0].passed is None


def test_table_names_match_the_gpu_table():
    names = set(known_models())
    for ref in refs.ALL:
        assert set(ref.gpus) <= names, ref
        assert (ref.value is None) == (ref.source is None), ref
    assert set(refs.UNPUBLISHED_NOTES) <= names and set(refs.PCIE_GEN) <= names
    assert not set(refs.UNPUBLISHED_NOTES) & {g for r in refs.THROUGHPUT for g in r.gpus}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("NVIDIA A100-SXM4-8GB", 8, "nvswitch"), "Did you mean 'NVIDIA A100-SXM4-80GB'"),
        (("NVIDIA L4", 1, "nvlnk"), "Did you mean 'nvlink'"),
        (("NVIDIA L4", 2, "single_gpu"), "use single_gpu for exactly one GPU"),
        (("NVIDIA L4", 0, "single_gpu"), "outside 1..16"),
    ],
)
def test_bad_host_kinds_say_what_to_fix(args, message):
    with pytest.raises(FloorError, match=message):
        floors_for(*args)


def test_floor_modules_import_on_a_host_without_control_node_packages():
    blocked = ("pyinfra", "rich", "jinja2", "gevent", "click", "pytest")
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r}))\n"
        "import gpufleet.floors.derived, gpufleet.floors.checks, gpufleet.floors.calibration\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-S", "-c", code], check=True, cwd=root)


CAL = """
schema = 1
gpu_model = "NVIDIA H100 80GB HBM3"
gpu_count = 8
interconnect = "nvswitch"
host = "gpu01"
margin = 0.9
[figures."resnet50.images_per_s.amp"]
values = [3010.0, 2985.5, 3022.1]
[figures."mirrored.gpu_utilization_spread_pct"]
values = [4.0, 6.0, 5.0]
margin = 0.5
"""
H100 = ["--gpu-model", "NVIDIA H100 80GB HBM3", "--gpu-count", "8", "--interconnect", "nvswitch"]


def _thresholds(capsys, *args: str) -> tuple[int, str, str]:
    rc = cli_main(["thresholds", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_calibration_replaces_published_floors_and_says_so(tmp_path, capsys):
    cal = tmp_path / "h100.toml"
    cal.write_text(CAL)
    rc, out, _ = _thresholds(capsys, *H100, "--calibration", str(cal), "--json")
    floors = {f["name"]: f for f in json.loads(out)}
    assert rc == 0
    amp = floors["resnet50.images_per_s.amp"]
    assert amp["value"] == round(3010.0 * 0.9, 3)
    assert amp["origin"].startswith(f"calibration ({cal}: median 3010 of 3 runs on gpu01")
    assert floors["mirrored.gpu_utilization_spread_pct"]["value"] == 10.0  # max bound: 5 / 0.5
    assert floors["allreduce.busbw_gbps"]["origin"].startswith("published")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("schema = 1", "schema = 2"), "'schema = 1' is required"),
        (lambda t: t.replace("gpu_count = 8", "gpu_count = 4"), "not NVIDIA H100 80GB HBM3 x8"),
        (lambda t: t.replace("images_per_s.amp", "images_per_s.ampp"), "did you mean"),
        (
            lambda t: t.replace("margin = 0.9", "margin = 1.5"),
            r"margin must be a number in \(0, 1\]",
        ),
        (lambda t: t.replace("[3010.0, 2985.5, 3022.1]", "[]"), "non-empty list of numbers"),
        (lambda t: t + "[[", "is not valid TOML"),
    ],
)
def test_bad_calibration_files_are_refused_clearly(tmp_path, capsys, edit, message):
    cal = tmp_path / "cal.toml"
    cal.write_text(edit(CAL))
    rc, out, err = _thresholds(capsys, *H100, "--calibration", str(cal))
    assert rc == 2 and out == ""
    assert err.startswith("gpufleet thresholds: ") and "Traceback" not in err
    assert re.search(message, err), err


def test_thresholds_prints_every_floor_with_its_origin(capsys):
    rc, out, _ = _thresholds(capsys, *H100)
    assert rc == 0
    for floor in floors_for("NVIDIA H100 80GB HBM3", 8, "nvswitch"):
        assert floor.name in out and floor.origin in out


@pytest.mark.parametrize(
    ("figures", "rc"),
    [
        ({"metrics": {"allreduce.busbw_gbps": 300.0, "mirrored.scaling_efficiency": 0.9}}, 0),
        ({"allreduce.busbw_gbps": 10.0}, 1),
        ({"workload": "mirrored", "metrics": {"scaling_efficiency": 0.3}}, 1),
        (
            {
                "checks": [],
                "workloads": [
                    {"workload": "mirrored", "metrics": {"scaling_efficiency": 0.9}},
                    {"workload": "allreduce", "metrics": {"busbw_gbps": 9.0}},
                ],
            },
            1,
        ),
        (
            {
                "checks": [],
                "workloads": [{"workload": "allreduce", "metrics": {"busbw_gbps": 300}}],
            },
            0,
        ),
        ({"allreduce.busbw_gbps": "fast"}, 2),
        ({"losses_match": True}, 2),  # nothing with a floor
        ([1, 2], 2),
    ],
)
def test_judge_exit_status(tmp_path, capsys, figures, rc):
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    got, out, err = _thresholds(capsys, *H100, "--judge", str(path))
    assert got == rc, out + err
    assert "Traceback" not in err
    if rc == 1:
        assert "FAIL" in out


def test_unknown_model_lists_known_names(capsys):
    args = ["--gpu-model", "H100 SXM", "--gpu-count", "1", "--interconnect", "single_gpu"]
    rc, out, err = _thresholds(capsys, *args)
    assert rc == 2 and out == "" and "unknown GPU model 'H100 SXM'. Did you mean" in err
    assert all(name in err for name in known_models())
