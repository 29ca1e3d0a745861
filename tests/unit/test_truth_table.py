"""Issue 32 item 6: each class's predicted healthy figures pass, each degraded one fails."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpufleet import health
from gpufleet.floors.checks import judge, meets
from gpufleet.floors.datasheets import below_expected, datasheet
from gpufleet.floors.derived import floors_for
from gpufleet.parsers import parse_nvidia_smi_xml
from tests.conftest import REPO_ROOT
from tests.unit import truth_table as tt
from validation.host.gpu_selection import throughput_outliers

SMI = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"
NAMES = sorted(tt.CLASSES)
# Floors whose healthy figure is a definition, not a prediction: every GPU busy and balanced,
# the card's full datasheet link.
DEFINED = {"mirrored.gpu_utilization_pct", "mirrored.gpu_utilization_spread_pct", "pcie."}


def gpus(name: str) -> list[str]:
    return [str(i) for i in range(tt.CLASSES[name].count)]


def healthy(name: str, end: int = -1) -> dict[str, object]:
    """The class's predicted healthy figures: the middle of each range (end -1), its low
    end (0) or its high end (1); per-GPU figures given for every GPU."""
    figs: dict[str, object] = {}
    for figure, floor in tt.floors(name).items():
        span = tt.predicted(name, figure)
        if figure.startswith("pcie."):
            row = datasheet(tt.CLASSES[name].model)
            assert row is not None
            value: float | None = row.pcie_gen if figure.endswith("gen") else row.pcie_width
        elif figure == "mirrored.gpu_utilization_pct":
            value = tt.BUSY_PCT
        elif span is None:
            continue
        else:
            value = (span[0] + span[1]) / 2 if end < 0 else span[end]
        if value is None or figure == "mirrored.gpu_utilization_spread_pct":
            continue
        figs[figure] = dict.fromkeys(gpus(name), value) if floor.per_gpu else value
    return figs


def failed(verdicts) -> set[str]:
    return {v.name.split("[")[0] for v in verdicts if v.passed is False}


# --- the table is complete and says which checks only report -------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_report_only_checks_are_the_ones_the_table_names(name: str) -> None:
    unset = {f for f, floor in tt.floors(name).items() if floor.value is None}
    assert unset == tt.REPORT_ONLY[name]


@pytest.mark.parametrize("name", NAMES)
def test_every_set_floor_has_a_sourced_healthy_figure(name: str) -> None:
    for figure, floor in tt.floors(name).items():
        if floor.value is None or any(figure.startswith(d) for d in DEFINED):
            continue
        assert tt.predicted(name, figure) is not None, f"{name}: no prediction for {figure}"
        assert tt.source(figure)


@pytest.mark.parametrize("name", NAMES)
def test_floors_the_suite_skips_at_this_memory_are_the_ones_the_table_names(name: str) -> None:
    # A floor the table holds must be one the suite applies at the batch that fits the GPU;
    # where memory makes the batch smaller than the published figure's, the table says so.
    skipped = {
        (name, f)
        for f, floor in tt.floors(name).items()
        if floor.value is not None and tt.suite_batch_skip(name, f)
    }
    assert skipped == {k for k in tt.NOT_AT_BATCH if k[0] == name}


# --- healthy hosts pass ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_predicted_healthy_host_passes_every_floor(name: str) -> None:
    # The middle of the review's range must pass each floor: a floor moved above it fails here.
    verdicts = judge(list(tt.floors(name).values()), healthy(name))
    assert failed(verdicts) == set()


@pytest.mark.parametrize("name", NAMES)
def test_the_low_end_of_each_range_passes_unless_the_review_calls_it_marginal(name: str) -> None:
    for figure, floor in tt.floors(name).items():
        span = tt.predicted(name, figure)
        exempt = (name, figure) in tt.MARGINAL
        if span is None or floor.value is None or exempt:
            continue
        assert meets(span[0], floor), f"{name}: {figure} low end {span[0]:g} fails"


# --- each degraded case of the review's section 3 fails the check meant to catch it ----------


def scaled(figs: dict[str, object], prefix: str, factor: float, only: str | None = None):
    out = dict(figs)
    for figure, value in figs.items():
        if not figure.startswith(prefix):
            continue
        if isinstance(value, dict):
            out[figure] = {g: v * factor if only in (None, g) else v for g, v in value.items()}
        elif only is None:
            out[figure] = value * factor  # type: ignore[operator]
    return out


def verdicts_of(name: str, figs: dict[str, object]) -> set[str]:
    return failed(judge(list(tt.floors(name).values()), figs))


@pytest.mark.parametrize("name", NAMES)
def test_half_clocks_on_every_gpu_fail_gemm_and_the_published_throughput(name: str) -> None:
    figs = scaled(scaled(healthy(name), "gemm.", 0.5), "resnet50.", 0.5)
    bad = verdicts_of(name, figs)
    gemm = {f for f in tt.floors(name) if f.startswith("gemm.")}
    throughput = {f for f, fl in tt.floors(name).items() if f.startswith("resnet50.") and fl.value}
    assert gemm | throughput <= bad


@pytest.mark.parametrize("name", NAMES)
def test_half_clocks_on_one_gpu_fail_gemm(name: str) -> None:
    bad = verdicts_of(name, scaled(healthy(name), "gemm.fraction_of_peak.fp16", 0.5, only="0"))
    assert "gemm.fraction_of_peak.fp16" in bad  # GPU 0 below the floor, whatever the count


@pytest.mark.parametrize("name", [n for n in NAMES if tt.CLASSES[n].count >= 3])
def test_one_gpu_of_eight_20_percent_slow_is_an_outlier_in_gemm_and_resnet50(name: str) -> None:
    figs = scaled(healthy(name), "gemm.", 0.8, only="5")
    assert "gemm.fraction_of_peak.fp16.outliers" in verdicts_of(name, figs)
    # ResNet-50 (N11): the suite compares the per-GPU documents, floor or none.
    docs = {g: {"metrics": {"resnet50.images_per_s.amp": 1000.0}} for g in gpus(name)}
    docs["5"] = {"metrics": {"resnet50.images_per_s.amp": 800.0}}
    (check,) = throughput_outliers(docs)
    assert check["status"] == "fail" and "GPU 5" in check["reason"]


@pytest.mark.parametrize("name", ["8xA100", "8xH100"])
def test_nvswitch_nvlink_down_to_pcie_fails_the_allreduce_floor(name: str) -> None:
    figs = {**healthy(name), "allreduce.busbw_gbps": 22.0}  # review §3: busbw about 20-25
    assert "allreduce.busbw_gbps" in verdicts_of(name, figs)


@pytest.mark.parametrize("measured", ["cross_socket", "pcie_host_bridge"])
def test_dgx1v_with_every_nvlink_down_fails_through_its_expected_class(measured: str) -> None:
    kind = tt.CLASSES["8xV100"]
    judged_as = below_expected(kind.model, 8, measured)  # N14: the board's class, not topo's
    assert judged_as == "nvlink_partial"
    fl = {f.name: f for f in floors_for(kind.model, 8, judged_as)}
    assert not meets(7.0, fl["allreduce.busbw_gbps"])  # review §3: 5-10 GB/s over PCIe


@pytest.mark.parametrize("name", NAMES)
def test_a_link_at_x8_or_a_generation_down_fails_the_pcie_floors(name: str) -> None:
    figs = healthy(name)
    gen = figs["pcie.link_gen"]
    assert isinstance(gen, dict)
    down = {**figs, "pcie.link_width": dict.fromkeys(gpus(name), 8)}
    down["pcie.link_gen"] = {g: v - 1 for g, v in gen.items()}
    assert {"pcie.link_width", "pcie.link_gen"} <= verdicts_of(name, down)


@pytest.mark.parametrize("name", NAMES)
def test_a_starved_input_pipeline_fails_the_busy_floor(name: str) -> None:
    figs = {**healthy(name), "input_pipeline.device_busy_fraction": 0.5}
    assert "input_pipeline.device_busy_fraction" in verdicts_of(name, figs)


@pytest.mark.parametrize("name", [n for n in NAMES if tt.CLASSES[n].count > 1])
def test_a_model_outside_the_strategy_scope_fails_the_busy_floors(name: str) -> None:
    idle = {g: (97.0 if g == "0" else 3.0) for g in gpus(name)}
    figs = {**healthy(name), "mirrored.gpu_utilization_pct": idle}
    assert {"mirrored.gpu_utilization_pct"} <= verdicts_of(name, figs)


# --- health: a stand-in GPU of each class from the recorded A100 report ----------------------


def stand_in(name: str, **changes):
    """The recorded A100 report (tests/fixtures/nvidia_smi/a100-sxm4-535-mig.xml) with its
    model, link, power limit and maximum clock set to the class's datasheet row, once per
    GPU of the class; ``changes`` then apply to GPU 0."""
    smi = parse_nvidia_smi_xml((SMI / "a100-sxm4-535-mig.xml").read_text())
    row = datasheet(tt.CLASSES[name].model)
    assert row is not None and row.power_w is not None
    gpu = dataclasses.replace(
        smi.gpus[0],
        name=row.model,
        pcie_gen_current=row.pcie_gen,
        pcie_gen_max=row.pcie_gen,
        pcie_gen_device_max=row.pcie_gen,
        power_limit_w=row.power_w,
        default_power_limit_w=row.power_w,
        max_sm_clock_mhz=row.boost_mhz,
    )
    count = changes.pop("count", tt.CLASSES[name].count)
    first = dataclasses.replace(gpu, **changes)
    return dataclasses.replace(smi, gpus=[first] + [gpu] * (count - 1))


def health_fails(smi, nvswitches: int = 0) -> set[str]:
    found = health.evaluate_idle(smi, None, nvswitches) + health.evaluate_under_load(smi)
    return {f.check for f in health.failures(found)}


@pytest.mark.parametrize("name", NAMES)
def test_a_healthy_stand_in_passes_health(name: str) -> None:
    assert health_fails(stand_in(name)) == set()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("changes", "check"),
    [
        ({"pcie_width_current": 8, "pcie_width_max": 8}, "pcie_datasheet"),  # x8 slot (N12)
        ({"ecc_uncorrected_aggregate": 3}, "ecc_lifetime"),  # after a reboot (N15)
        ({"retired_pages_pending": True}, "ecc_lifetime"),
        ({"power_limit_w": 0.5}, "power_clocks"),  # half clocks by nvidia-smi -pl (N16)
        ({"applications_clock_mhz": 600}, "power_clocks"),  # nvidia-smi -ac below default
    ],
)
def test_degraded_health_fails_its_check(name: str, changes: dict, check: str) -> None:
    row = datasheet(tt.CLASSES[name].model)
    if "power_limit_w" in changes and row is not None and row.power_w is not None:
        changes = {"power_limit_w": row.power_w * 0.5}
    assert check in health_fails(stand_in(name, **changes))


@pytest.mark.parametrize("name", ["8xV100", "8xA100", "8xH100"])
def test_a_missing_gpu_on_a_board_fails_the_count_without_an_inventory(name: str) -> None:
    assert "gpu_count" in health_fails(stand_in(name, count=7))  # N13


def test_a_missing_pcie_card_needs_the_inventory_count() -> None:
    # What is left of N13: nothing on the bus says how many PCIe cards a host had.
    assert "gpu_count" not in health_fails(stand_in("8xL40S", count=7))
    smi = stand_in("8xL40S", count=7)
    assert health.check_gpu_count(smi, 8)


# --- docs/reference/floors.md agrees --------------------------------------------------------


def test_the_floors_page_carries_the_truth_tables_prediction() -> None:
    page = (REPO_ROOT / "docs" / "reference" / "floors.md").read_text(encoding="utf-8")
    assert tt.readme_table() in page, "regenerate floors.md's table: tests/unit/truth_table.py"
