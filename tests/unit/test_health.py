"""GPU health verdicts on recorded real `nvidia-smi -q -x` outputs (tests/fixtures/nvidia_smi)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpufleet import health
from gpufleet.parsers import parse_nvidia_smi_xml

SMI = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"


def parsed(name: str):
    return parse_nvidia_smi_xml((SMI / name).read_text())


def with_gpu_fields(smi, **changes):
    """Synthetic variant of a real report: one GPU's fields changed (stated in each test)."""
    gpu = dataclasses.replace(smi.gpus[0], **changes)
    return dataclasses.replace(smi, gpus=[gpu])


def checks_of(findings, severity="fail"):
    return sorted({f.check for f in findings if f.severity == severity})


# --- real recorded outputs ----------------------------------------------------------------


def test_healthy_a100_has_no_findings():
    smi = parsed("a100-sxm4-535-mig.xml")  # gen 4 x16 of 4 x16, ECC 0, no reasons active
    assert health.evaluate(smi, smi, expected_gpu_count=1) == []


def test_v100_uncorrectable_volatile_ecc_fails():
    smi = parsed("v100-sxm3-410.xml")  # volatile double_bit total = 1 (aggregate 7627)
    findings = health.evaluate_idle(smi, expected_gpu_count=1)
    assert checks_of(findings) == ["ecc", "ecc_lifetime"]
    (ecc,) = health.failures(findings, "ecc")
    assert ecc.gpu == "0" and ecc.figures == {"ecc_uncorrected_volatile": 1}
    assert "Tesla V100-SXM3-32GB" in ecc.message and "00000000:34:00.0" in ecc.message
    assert "1 uncorrectable volatile ECC error" in ecc.message


def test_t4_pcie_width_below_max_under_load_fails():
    smi = parsed("tesla-t4-515.xml")  # gen 3 of 3, x8 of x16
    findings = health.failures(health.evaluate_under_load(smi), "pcie_link")
    assert checks_of(health.evaluate_under_load(smi)) == ["pcie_datasheet", "pcie_link"]
    assert "x8 of x16" in findings[0].message and "gen" not in findings[0].message.split(":")[1]
    assert findings[0].figures["pcie_width_max"] == 16


def test_t4_idle_checks_pass():
    # The link width only counts under load: the same report taken at idle is healthy.
    assert health.evaluate_idle(parsed("tesla-t4-515.xml"), expected_gpu_count=1) == []


def test_rtx_idle_report_taken_as_load_sample_fails_on_idle_and_gen1():
    smi = parsed("rtx-4000-sff-ada-595.xml")  # gpu_idle active, PCIe gen 1 of 4
    findings = {f.check: f for f in health.evaluate_under_load(smi)}
    assert sorted(findings) == ["clock_event_reasons", "pcie_link"]
    assert "gen 1 of 4" in findings["pcie_link"].message
    # Idle during the load sample means the load never reached the GPU.
    assert findings["clock_event_reasons"].severity == "fail"
    assert "did not reach this GPU" in findings["clock_event_reasons"].message
    assert findings["clock_event_reasons"].figures == {"active": ["gpu_idle"]}


def test_rtx_remapped_rows_reported_as_none_pending():
    smi = parsed("rtx-4000-sff-ada-595.xml")
    assert smi.gpus[0].remapped_rows_pending is False
    assert health.check_row_remap(smi) == []


def test_gpu_count_mismatch_fails_and_none_means_not_asserted():
    smi = parsed("a100-sxm4-535-mig.xml")
    (finding,) = health.check_gpu_count(smi, 8)
    assert finding.figures == {"seen": 1, "expected": 8}
    assert "sees 1 GPU(s), expected 8" in finding.message
    assert health.check_gpu_count(smi, None) == []


@pytest.mark.parametrize("name", sorted(p.name for p in SMI.glob("*.xml")))
def test_gpu_summary_is_json_ready(name):
    import json

    rows = health.gpu_summary(parsed(name))
    assert rows and json.loads(json.dumps(rows))[0]["uuid"].startswith("GPU-")


# --- synthetic variants of real reports (one field changed each) ---------------------------


def test_pending_row_remap_fails():
    smi = with_gpu_fields(parsed("rtx-4000-sff-ada-595.xml"), remapped_rows_pending=True)
    (finding,) = health.check_row_remap(smi)
    assert finding.severity == "fail" and "pending" in finding.message


def test_row_remap_failure_fails():
    smi = with_gpu_fields(parsed("rtx-4000-sff-ada-595.xml"), remapped_rows_failure=True)
    (finding,) = health.check_row_remap(smi)
    assert "replaced" in finding.message


@pytest.mark.parametrize(
    "reason",
    ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"],
)
def test_throttling_reasons_under_load_fail(reason):
    smi = with_gpu_fields(parsed("a100-sxm4-535-mig.xml"), clock_event_reasons_active=[reason])
    findings = health.evaluate_under_load(smi)
    assert checks_of(findings) == ["clock_event_reasons"]
    assert reason in findings[0].message


@pytest.mark.parametrize("reason", ["sw_power_cap", "applications_clocks_setting", "sync_boost"])
def test_benign_reasons_are_info_only(reason):
    smi = with_gpu_fields(parsed("a100-sxm4-535-mig.xml"), clock_event_reasons_active=[reason])
    assert health.failures(health.evaluate_under_load(smi)) == []


def test_reason_names_from_both_xml_generations_normalise():
    assert health.reason_name("clocks_throttle_reason_hw_slowdown") == "hw_slowdown"
    assert health.reason_name("clocks_event_reason_sw_thermal_slowdown") == "sw_thermal_slowdown"
    assert health.reason_name("gpu_idle") == "gpu_idle"


def test_unknown_values_are_not_failures():
    # N/A in nvidia-smi parses to None: unknown never counts as broken.
    smi = with_gpu_fields(
        parsed("a100-sxm4-535-mig.xml"),
        ecc_uncorrected_volatile=None,
        pcie_gen_current=None,
        pcie_width_current=None,
    )
    assert health.evaluate(smi, smi) == []


def test_accepts_dict_shaped_reports():
    smi = parsed("v100-sxm3-410.xml")
    as_dict = {"gpus": [dataclasses.asdict(g) for g in smi.gpus]}
    assert checks_of(health.evaluate_idle(as_dict)) == ["ecc", "ecc_lifetime"]
