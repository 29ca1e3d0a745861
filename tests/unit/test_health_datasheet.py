"""Faults health used to pass (review 2 N12, N13, N15, N16), on recorded `nvidia-smi -q -x`."""

# Each report is a real one from tests/fixtures/nvidia_smi (sources in its SOURCES.md); where a
# fault needs a figure no recording shows, one field of a real report is changed, as the test
# says. Every test here failed before the change that added its check (noted per test).

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpufleet import health
from gpufleet.floors.datasheets import DATASHEETS, datasheet, expected_gpu_count
from gpufleet.parsers import parse_nvidia_smi_xml

SMI = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"


def parsed(name: str):
    return parse_nvidia_smi_xml((SMI / name).read_text())


def changed(smi, count: int = 1, **changes):
    """``count`` copies of the report's GPU, with ``changes`` applied to the first."""
    first = dataclasses.replace(smi.gpus[0], **changes)
    return dataclasses.replace(smi, gpus=[first] + [smi.gpus[0]] * (count - 1))


def fails(findings, check):
    return [f for f in health.failures(findings) if f.check == check]


# --- the recorded reports read as their hardware ------------------------------------------


def test_the_parser_reads_limits_counters_and_the_device_link():
    a100 = parsed("a100-sxm4-535-mig.xml").gpus[0]
    assert (a100.power_limit_w, a100.default_power_limit_w) == (500.0, 500.0)
    assert (a100.applications_clock_mhz, a100.default_applications_clock_mhz) == (1275, 1275)
    assert (a100.max_sm_clock_mhz, a100.pcie_gen_device_max) == (1410, 4)
    v100 = parsed("v100-sxm3-410.xml").gpus[0]
    assert (v100.ecc_uncorrected_aggregate, v100.ecc_corrected_aggregate) == (7627, 291)
    assert (v100.retired_pages, v100.retired_pages_pending) == (2, True)
    t4 = parsed("tesla-t4-515.xml").gpus[0]
    assert (t4.retired_pages, t4.retired_pages_pending, t4.power_limit_w) == (0, False, 70.0)


def test_healthy_recordings_meet_their_datasheets():
    # The recorded A100 (a 500 W custom-thermal SKU) and T4 show the datasheet's boost clock,
    # at least its power and (A100) its PCIe link.
    for name in ("a100-sxm4-535-mig.xml", "tesla-t4-515.xml"):
        smi = parsed(name)
        assert health.failures(health.evaluate_idle(smi, 1)) == []
    a100 = parsed("a100-sxm4-535-mig.xml")
    assert health.failures(health.evaluate_under_load(a100)) == []


def test_every_datasheet_row_names_its_source_and_a_known_model():
    from gpufleet.floors.derived import known_models

    for row in DATASHEETS.values():
        assert row.source and row.model in known_models()
    assert datasheet("nvidia a100-sxm4-80gb") is DATASHEETS["NVIDIA A100-SXM4-80GB"]


# --- N12: a link capped by the slot --------------------------------------------------------


def test_n12_an_a100_in_a_gen3_slot_fails_against_the_datasheet():
    # Old behaviour: current 3 == max 3, so pcie_link passed (max_link is capped by the slot).
    smi = changed(parsed("a100-sxm4-535-mig.xml"), pcie_gen_current=3, pcie_gen_max=3)
    found = health.evaluate_under_load(smi)
    assert fails(found, "pcie_link") == []
    (bad,) = fails(found, "pcie_datasheet")
    assert "gen 3 where the datasheet gives gen 4" in bad.message


def test_n12_an_x8_slot_fails_and_the_idle_report_is_not_judged_for_the_link():
    smi = changed(parsed("a100-sxm4-535-mig.xml"), pcie_width_current=8, pcie_width_max=8)
    assert (
        "x8 where the datasheet gives x16"
        in fails(health.evaluate_under_load(smi), "pcie_datasheet")[0].message
    )
    assert fails(health.evaluate_idle(smi, 1), "pcie_datasheet") == []


# --- N13: a GPU gone from the bus ----------------------------------------------------------


@pytest.mark.parametrize(("seen", "nvswitches", "expected"), [(7, 0, 8), (3, 0, 4), (7, 6, 8)])
def test_n13_a_missing_sxm_gpu_fails_without_an_inventory_count(seen, nvswitches, expected):
    # Old behaviour: expected None -> no finding, whatever nvidia-smi and the PCI bus showed.
    smi = changed(parsed("a100-sxm4-535-mig.xml"), count=seen)
    (bad,) = health.check_gpu_count(smi, None, nvswitches)
    assert bad.figures == {"seen": seen, "expected": expected}


def test_n13_whole_boards_and_pcie_cards_pass_and_the_inventory_still_wins():
    assert health.check_gpu_count(changed(parsed("a100-sxm4-535-mig.xml"), count=8), None) == []
    assert health.check_gpu_count(changed(parsed("tesla-t4-515.xml"), count=3), None) == []
    assert health.check_gpu_count(changed(parsed("a100-sxm4-535-mig.xml"), count=7), 7) == []
    assert expected_gpu_count("NVIDIA H100 80GB HBM3", 4, nvswitches=4) == 8


# --- N15: lifetime ECC and retired pages ---------------------------------------------------


def test_n15_lifetime_uncorrectable_errors_fail_after_the_volatile_counter_reset():
    # A reboot zeroes the volatile counter: the recorded V100's aggregate 7627 DBEs remain.
    # Old behaviour: volatile 0 -> no finding.
    smi = changed(parsed("v100-sxm3-410.xml"), ecc_uncorrected_volatile=0)
    found = health.evaluate_idle(smi, 1)
    assert fails(found, "ecc") == []
    messages = [f.message for f in fails(found, "ecc_lifetime")]
    assert any("7627 uncorrectable" in m for m in messages)
    assert any("pending blacklist" in m for m in messages)  # the recording's pending: Yes


def test_n15_retired_pages_and_correctable_errors_are_reported_not_failed():
    smi = changed(
        parsed("v100-sxm3-410.xml"),
        ecc_uncorrected_volatile=0,
        ecc_uncorrected_aggregate=0,
        retired_pages_pending=False,
    )
    found = [f for f in health.evaluate_idle(smi, 1) if f.check == "ecc_lifetime"]
    assert [f.severity for f in found] == ["info"]
    assert found[0].figures == {
        "retired_pages": 2,
        "ecc_corrected_volatile": 1,
        "ecc_corrected_aggregate": 291,
    }


# --- N16: admin-lowered power limits and clocks -------------------------------------------


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"power_limit_w": 300.0}, "below the board's default 500 W"),
        ({"power_limit_w": 350.0, "default_power_limit_w": 350.0}, "datasheet's 400 W"),
        ({"applications_clock_mhz": 1095}, "applications clock 1095 MHz below its default"),
        ({"max_sm_clock_mhz": 1200}, "below the datasheet's 1410 MHz"),
    ],
)
def test_n16_lowered_power_or_clocks_fail_health(changes, words):
    # Old behaviour: no check read these fields, and sw_power_cap or
    # applications_clocks_setting under load are info only.
    smi = changed(parsed("a100-sxm4-535-mig.xml"), **changes)
    (bad,) = fails(health.evaluate_idle(smi, 1), "power_clocks")
    assert words in bad.message


def test_n16_a_t4_at_its_70_w_default_passes():
    assert fails(health.evaluate_idle(parsed("tesla-t4-515.xml"), 1), "power_clocks") == []
    low = changed(parsed("tesla-t4-515.xml"), power_limit_w=60.0)
    assert "datasheet's 70 W" in fails(health.evaluate_idle(low, 1), "power_clocks")[0].message
