"""GEMM on every GPU: sustained figures, per-GPU floors, outliers, clock-event telemetry.

The per-GPU TFLOP/s below are inputs built from the published fractions in
gpufleet.floors.references (healthy) and from the degradations issue 13 item 8 names (half
clocks, one GPU of eight 20 % slow); they are not recorded GPU output.
"""

from __future__ import annotations

import pytest

from gpufleet.floors.derived import floors_for
from validation.host.nvml_sampler import Sample
from validation.host.nvml_telemetry import clock_event_names, device_telemetry, phase_telemetry
from validation.workloads._gemm_judge import SETTLE, judge, matrix_peaks, summarize

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def _floor(model: str, precision: str, count: int = 8, link: str = "nvswitch"):
    by_name = {f.name: f for f in floors_for(model, count, link)}
    return by_name[f"gemm.fraction_of_peak.{precision}"]


def _host(model: str, precision: str, fraction: float, count: int = 8) -> dict[str, float]:
    peak = matrix_peaks(model)[0][precision]
    return {str(g): fraction * peak for g in range(count)}


@pytest.mark.parametrize(
    ("model", "precision", "healthy"),
    [(A100, "fp16", 0.82), (A100, "bf16", 0.82), (H100, "fp16", 0.76), (H100, "bf16", 0.76)],
)
def test_healthy_8_gpu_hosts_pass_and_half_clocks_fail(model, precision, healthy) -> None:
    peak = matrix_peaks(model)[0][precision]
    floor = _floor(model, precision)
    ok = judge(precision, _host(model, precision, healthy), peak, floor)
    assert ok.floor.status == "pass" and ok.outliers.status == "pass", ok
    half = judge(precision, _host(model, precision, healthy / 2), peak, floor)
    assert half.floor.status == "fail"
    assert "GPU 0" in half.floor.reason and "GPU 7" in half.floor.reason


def test_one_gpu_of_eight_20_percent_slow_fails_by_name_even_above_the_floor() -> None:
    tflops = _host(H100, "bf16", 0.78)
    tflops["5"] *= 0.80  # 0.62 of peak: below the host median by 20 %, and below the 0.68 floor
    verdicts = judge("bf16", tflops, matrix_peaks(H100)[0]["bf16"], _floor(H100, "bf16"))
    assert verdicts.outliers.status == "fail"
    assert "GPU 5 20% below" in verdicts.outliers.reason
    # 12 % slow stays above the floor, yet the outlier check still names it.
    mild = _host(H100, "bf16", 0.78)
    mild["2"] *= 0.88
    verdicts = judge("bf16", mild, matrix_peaks(H100)[0]["bf16"], _floor(H100, "bf16"))
    assert verdicts.floor.status == "pass"
    assert verdicts.outliers.status == "fail" and "GPU 2 12% below" in verdicts.outliers.reason


def test_power_capped_l4_passes_at_its_measured_fraction() -> None:
    floor = _floor("NVIDIA L4", "fp16", count=1, link="single_gpu")
    peak = matrix_peaks("NVIDIA L4")[0]["fp16"]
    # zzc0721/torch-performance-test-data#120 (review): L4 FP16 53.8 TFLOP/s of 121 = 0.44.
    assert judge("fp16", {"0": 53.8}, peak, floor).floor.status == "pass"
    assert judge("fp16", {"0": 53.8 / 2}, peak, floor).floor.status == "fail"
    # One GPU has no host median: the outlier check does not apply.
    assert judge("fp16", {"0": 53.8}, peak, floor).outliers.status == "not_applicable"


def test_busy_is_inconclusive_never_a_fail_and_no_gpu_not_applicable() -> None:
    half = _host(A100, "fp16", 0.4)
    busy = judge("fp16", half, 312.0, _floor(A100, "fp16"), busy="GPU busy (PIDs 7 python)")
    assert busy.floor.status == busy.outliers.status == "inconclusive"
    assert busy.floor.reason == "GPU busy (PIDs 7 python)"
    cpu = judge("fp16", {"CPU:0": 0.1}, None, None, skip="no GPU")
    assert cpu.floor.status == cpu.outliers.status == "not_applicable"


def test_without_a_peak_the_fraction_is_not_judged_but_outliers_are() -> None:
    tflops = {str(g): 100.0 for g in range(4)} | {"3": 70.0}
    verdicts = judge("fp16", tflops, None, None)
    assert verdicts.floor.status == "not_applicable"
    assert "no datasheet peak" in verdicts.floor.reason
    assert verdicts.outliers.status == "fail" and "GPU 3" in verdicts.outliers.reason


def test_throttle_note_is_appended_to_the_failing_reason() -> None:
    verdicts = judge(
        "fp16",
        _host(A100, "fp16", 0.4),
        312.0,
        _floor(A100, "fp16"),
        note="clock events during the run: gpu3 hw_slowdown",
    )
    assert verdicts.floor.status == "fail" and verdicts.floor.reason.endswith("gpu3 hw_slowdown")


def test_matrix_peaks_come_from_gpus_py_and_unknown_models_say_why() -> None:
    peaks, source = matrix_peaks(H100)
    assert peaks["fp16"] > peaks["tf32"] > peaks["fp32"] > 0
    assert "gpufleet.matrix.gpus" in source
    peaks, why = matrix_peaks("NVIDIA Imaginary 9000")
    assert peaks == {} and "unknown GPU model 'NVIDIA Imaginary 9000'" in why
    assert matrix_peaks(None)[0] == {}


def test_sustained_is_the_late_window_and_a_throttling_gpu_shows_it() -> None:
    window = 20.0
    flops = 2.0 * 8192**3 * 8  # one repetition
    fast, slow = flops / 700e12, flops / 500e12  # seconds per repetition at 700 / 500 TFLOP/s
    early = [(t * 0.5, fast) for t in range(int(SETTLE * window / 0.5))]
    late = [(SETTLE * window + t * 0.5, slow) for t in range(20)]
    steady = [(t * 0.5, fast) for t in range(40)]
    summary = summarize({"0": early + late, "1": steady}, flops, window)
    assert summary["0"]["initial_tflops"] == pytest.approx(700.0, rel=1e-3)
    assert summary["0"]["sustained_tflops"] == pytest.approx(500.0, rel=1e-3)
    assert summary["1"]["sustained_tflops"] == pytest.approx(700.0, rel=1e-3)
    # Fewer than 3 late repetitions (a slow precision): every repetition counts.
    short = summarize({"0": [(0.0, slow), (1.0, slow)]}, flops, window)
    assert short["0"]["sustained_tflops"] == pytest.approx(500.0, rel=1e-3)


def test_clock_event_bits_follow_nvml() -> None:
    # nvml.h: nvmlClocksEventReasonSwPowerCap 0x4, HwSlowdown 0x8, HwThermalSlowdown 0x40.
    assert clock_event_names(0x4 | 0x8 | 0x40) == [
        "sw_power_cap",
        "hw_slowdown",
        "hw_thermal_slowdown",
    ]
    assert clock_event_names(0) == []
    assert clock_event_names(0x1000) == ["bit_0x1000"]


def _sample(t: float, mask: int, clock: float = 1980.0, phase: str = "fp16") -> Sample:
    return Sample(t, "gpu0", phase, 100.0, 1000.0, clock, 690.0, 71.0, mask)


def test_telemetry_names_hardware_slowdown_but_not_power_cap_or_an_edge_idle() -> None:
    readings = [_sample(i, 0x4) for i in range(18)] + [_sample(18, 0x1), _sample(19, 0x4)]
    summary = device_telemetry(readings)
    assert summary["clock_event_reasons"]["sw_power_cap"] == 0.95
    assert summary["throttled_by"] == []  # power cap is benign, one idle reading an edge
    slowed = device_telemetry([_sample(i, 0x8, clock=1100.0) for i in range(10)])
    assert slowed["throttled_by"] == ["hw_slowdown"] and slowed["sm_clock_mhz_median"] == 1100.0
    both = phase_telemetry([*readings, _sample(30, 0x8, phase="bf16")], "fp16")
    assert list(both) == ["gpu0"] and both["gpu0"]["samples"] == 20
