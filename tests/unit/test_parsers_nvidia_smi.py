"""nvidia-smi CSV and XML parsers on real recorded output (sources in
tests/fixtures/nvidia_smi/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.parsers import parse_nvidia_smi_csv, parse_nvidia_smi_xml
from gpufleet.parsers.nvidia_smi import NvidiaSmiParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_names_its_source():
    sources = fixture("SOURCES.md")
    files = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".xml", ".csv"))
    assert len(files) >= 10
    missing = [name for name in files if f"| {name} |" not in sources]
    assert not missing, f"SOURCES.md does not name the source of {missing}"


# --- XML --------------------------------------------------------------------------------------

# fixture -> (driver, cuda, expected fields of its only GPU)
XML_CASES = {
    "v100-sxm3-410.xml": (
        "410.104",
        "10.0",
        dict(
            name="Tesla V100-SXM3-32GB",
            uuid="GPU-ef23ffa6-c9fd-93d5-aeb8-612c087255ff",
            pci_bus_id="00000000:34:00.0",
            memory_total_mib=32480,
            persistence_mode=True,
            mig_mode=None,  # no <mig_mode> before Ampere-era drivers
            ecc_uncorrected_volatile=1,  # volatile/double_bit/total
            remapped_rows_pending=None,
            remapped_rows_failure=None,
            clock_event_reasons_active=["gpu_idle"],  # old clocks_throttle_reasons block
            pcie_gen_current=3,
            pcie_gen_max=3,
            pcie_width_current=16,
            pcie_width_max=16,
            temperature_c=33.0,
            power_draw_w=50.60,  # power_readings/power_draw
        ),
    ),
    "tesla-t4-515.xml": (
        "515.105.01",
        "11.7",
        dict(
            name="Tesla T4",
            pci_bus_id="00000000:00:1E.0",
            memory_total_mib=15360,
            persistence_mode=False,
            mig_mode=None,  # "N/A"
            ecc_uncorrected_volatile=0,  # sram_uncorrectable + dram_uncorrectable
            remapped_rows_pending=None,  # <remapped_rows>N/A</remapped_rows>
            clock_event_reasons_active=[],
            pcie_gen_current=3,
            pcie_width_current=8,
            pcie_width_max=16,
            temperature_c=40.0,
            power_draw_w=26.78,
        ),
    ),
    "a100-sxm4-535-mig.xml": (
        "535.54.03",
        "12.2",
        dict(
            name="NVIDIA A100-SXM4-80GB",
            uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
            memory_total_mib=81920,  # the GPU's, not a MIG slice's 19968
            persistence_mode=False,
            mig_mode="Enabled",
            ecc_uncorrected_volatile=0,
            remapped_rows_failure=None,
            clock_event_reasons_active=[],
            pcie_gen_current=4,
            pcie_gen_max=4,
            temperature_c=27.0,
            power_draw_w=67.03,  # gpu_power_readings/power_draw
        ),
    ),
    "rtx-4000-sff-ada-595.xml": (
        "595.84",
        "13.2",
        dict(
            name="NVIDIA RTX 4000 SFF Ada Generation",
            memory_total_mib=20475,
            persistence_mode=True,
            mig_mode=None,
            ecc_uncorrected_volatile=None,  # ECC disabled: every counter N/A
            remapped_rows_pending=False,
            remapped_rows_failure=False,
            clock_event_reasons_active=["gpu_idle"],  # new clocks_event_reasons block
            pcie_gen_current=1,
            pcie_gen_max=4,
            pcie_width_current=16,
            temperature_c=38.0,
            power_draw_w=8.44,  # instant_power_draw preferred over average_power_draw 8.81
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(XML_CASES))
def test_xml_fields_on_real_output(name):
    driver, cuda, expected = XML_CASES[name]
    log = parse_nvidia_smi_xml(fixture(name))
    assert (log.driver_version, log.cuda_version) == (driver, cuda)
    assert len(log.gpus) == 1
    gpu = log.gpus[0].to_dict()
    assert {key: gpu[key] for key in expected} == expected


def test_xml_to_dict_is_json():
    log = parse_nvidia_smi_xml(fixture("a100-sxm4-535-mig.xml"))
    data = json.loads(json.dumps(log.to_dict()))
    assert data["gpus"][0]["mig_mode"] == "Enabled"
    assert data["driver_version"] == "535.54.03"


def test_xml_active_hw_slowdown_reasons_are_listed():
    # Flip two reasons of a real document to Active: the parser must report both, in order.
    text = fixture("a100-sxm4-535-mig.xml")
    for reason in ("hw_slowdown", "hw_thermal_slowdown"):
        tag = f"clocks_event_reason_{reason}"
        text = text.replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    gpu = parse_nvidia_smi_xml(text).gpus[0]
    assert gpu.clock_event_reasons_active == ["hw_slowdown", "hw_thermal_slowdown"]


def test_xml_missing_elements_give_none():
    log = parse_nvidia_smi_xml("<nvidia_smi_log><gpu id='00000000:3B:00.0'/></nvidia_smi_log>")
    gpu = log.gpus[0]
    assert log.driver_version is None and log.cuda_version is None
    assert gpu.pci_bus_id == "00000000:3B:00.0"  # falls back to the id attribute
    assert gpu.name is None and gpu.memory_total_mib is None and gpu.power_draw_w is None
    assert gpu.ecc_uncorrected_volatile is None and gpu.clock_event_reasons_active == []


def test_xml_refuses_entities():
    with pytest.raises(NvidiaSmiParseError, match="entities"):
        parse_nvidia_smi_xml(
            '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "boom">]><nvidia_smi_log/>'
        )


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "",
    ],
)
def test_xml_garbage_is_a_clear_error(text):
    with pytest.raises(NvidiaSmiParseError, match="nvidia-smi -q -x"):
        parse_nvidia_smi_xml(text)


def test_xml_wrong_root_is_refused():
    with pytest.raises(NvidiaSmiParseError, match="nvidia_smi_log"):
        parse_nvidia_smi_xml("<something/>")


# --- CSV --------------------------------------------------------------------------------------


def test_csv_header_with_units():
    rows = parse_nvidia_smi_csv(fixture("csv-header-units-rtx2080super.csv"))
    assert len(rows) == 1
    row = rows[0]
    assert row["name"] == "NVIDIA GeForce RTX 2080 SUPER"
    assert row["fan.speed"] == "38"  # "38 %" with header "fan.speed [%]"
    assert row["memory.used"] == "575"  # "575 MiB"
    assert row["serial"] is None  # "[N/A]"
    assert row["pci.sub_device_id"] == "0x40051458"
    assert "fan.speed [%]" not in row


def test_csv_log_with_timestamps():
    rows = parse_nvidia_smi_csv(fixture("csv-header-units-log.csv"))
    assert [row["memory.used"] for row in rows] == ["21", "7", "7", "7", "21"]
    assert rows[0]["timestamp"] == "2024/01/16 14:44:16.977"
    assert rows[0]["utilization.gpu"] == "0"
    assert rows[0]["memory.total"] == "23028"


I3PYSTATUS_FIELDS = [
    "memory.total",
    "memory.free",
    "memory.used",
    "temperature.gpu",
    "fan.speed",
    "utilization.gpu",
    "utilization.memory",
]


@pytest.mark.parametrize(
    "name", ["csv-noheader-nounits-na.csv", "csv-noheader-nounits-not-supported.csv"]
)
def test_csv_noheader_nounits_placeholders(name):
    rows = parse_nvidia_smi_csv(fixture(name), fields=I3PYSTATUS_FIELDS)
    assert rows == [
        {
            "memory.total": "2004",
            "memory.free": "2004",
            "memory.used": "0",
            "temperature.gpu": "44",
            "fan.speed": None,
            "utilization.gpu": "0",
            "utilization.memory": "0",
        }
    ]


def test_csv_noheader_with_units_strips_known_units():
    fields = [
        "gpu_name",
        "utilization.gpu",
        "utilization.memory",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "fan.speed",
        "pstate",
        "clocks.current.graphics",
        "clocks.current.memory",
        "power.max_limit",
        "power.default_limit",
    ]
    (row,) = parse_nvidia_smi_csv(fixture("csv-noheader-units-gtx770.csv"), fields=fields)
    assert row["gpu_name"] == "GeForce GTX 770"
    assert row["fan.speed"] == "52"  # "52 %"
    assert row["temperature.gpu"] == "52"
    assert row["pstate"] == "P0"
    assert row["power.draw"] is None and row["clocks.current.memory"] is None


def test_csv_noheader_nounits_bare_na():
    fields = [
        "power.limit",
        "power.min_limit",
        "power.max_limit",
        "memory.total",
        "vbios_version",
        "driver_version",
        "name",
        "gpu_uuid",
        "power.draw",
        "temperature.gpu",
        "temperature.memory",
        "clocks.current.graphics",
        "clocks.sm",
        "clocks.mem",
        "utilization.gpu",
        "utilization.memory",
        "fan.speed",
        "pcie.link.width.current",
        "pstate",
    ]
    (row,) = parse_nvidia_smi_csv(fixture("csv-noheader-nounits-rtx2080.csv"), fields=fields)
    assert row["name"] == "GeForce RTX 2080"
    assert row["temperature.memory"] is None  # bare "N/A"
    assert row["power.draw"] == "176.98"
    assert row["pcie.link.width.current"] == "8"


def test_csv_fields_with_header_present_uses_the_header():
    rows = parse_nvidia_smi_csv(
        fixture("csv-header-units-log.csv"),
        fields=[
            "timestamp",
            "pstate",
            "temperature.gpu",
            "utilization.gpu",
            "utilization.memory",
            "memory.total",
            "memory.free",
            "memory.used",
        ],
    )
    assert len(rows) == 5 and rows[0]["memory.total"] == "23028"


def test_csv_noheader_without_fields_is_a_clear_error():
    with pytest.raises(NvidiaSmiParseError, match="fields="):
        parse_nvidia_smi_csv(fixture("csv-noheader-nounits-na.csv"))


def test_csv_wrong_field_count_is_a_clear_error():
    with pytest.raises(NvidiaSmiParseError, match="7 values but 2 columns"):
        parse_nvidia_smi_csv(fixture("csv-noheader-nounits-na.csv"), fields=["a", "b"])


def test_csv_empty_output_is_no_rows():
    assert parse_nvidia_smi_csv("") == []
