"""parse_lspci and parse_sysfs_pci on real recorded lspci output (tests/fixtures/lspci)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.parsers import parse_lspci
from gpufleet.parsers.pci import PciDevice, parse_sysfs_pci

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lspci"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_plain_lspci_has_no_ids():
    (device,) = parse_lspci(fixture("plain_3d_controller_gk107m.txt"))
    assert device == PciDevice(
        slot="01:00.0",
        device_class="3D controller",
        vendor_id=None,
        device_id=None,
        name="GK107M [GeForce GT 750M]",
    )
    assert device.is_gpu


def test_plain_grep_skips_intel_gpu():
    devices = parse_lspci(fixture("plain_grep_intel_and_nvidia.txt"))
    assert [(d.slot, d.name) for d in devices] == [("06:00.0", "GP108M [GeForce MX250]")]


def test_nn_reads_vendor_and_device_ids_and_skips_other_vendors():
    devices = parse_lspci(fixture("nn_grep_intel_and_two_nvidia.txt"))
    assert [(d.slot, d.device_class, d.vendor_id, d.device_id, d.name) for d in devices] == [
        ("02:00.0", "3D controller", "10de", "174d", "GM108M [GeForce MX130]"),
        ("08:00.0", "VGA compatible controller", "10de", "13c2", "GM204 [GeForce GTX 970]"),
    ]


def test_dgx_h200_eight_gpus():
    devices = parse_lspci(fixture("nn_dgx_h200.txt"))
    assert len(devices) == 8
    assert {d.device_id for d in devices} == {"2335"}
    assert {d.name for d in devices} == {"GH100 [H200 SXM 141GB]"}
    assert devices[-1].slot == "df:00.0"
    assert all(d.is_gpu and not d.is_nvswitch for d in devices)


def test_indented_detail_lines_are_not_devices():
    # "Subsystem: Dell GP107M ..." and "Kernel modules: nvidiafb, nouveau, ..." mention
    # NVIDIA names but are details of the device above them.
    devices = parse_lspci(fixture("nnk_with_detail_lines.txt"))
    assert [(d.slot, d.device_id) for d in devices] == [("01:00.0", "1c8c")]


def test_prog_if_suffix_is_stripped():
    (device,) = parse_lspci(fixture("nn_prog_if.txt"))
    assert (device.device_id, device.name) == ("2206", "GA102 [GeForce RTX 3080]")


def test_unknown_device_without_space_before_rev():
    (device,) = parse_lspci(fixture("vnn_unnamed_no_space_before_rev.txt"))
    assert (device.vendor_id, device.device_id, device.name) == ("10de", "13c2", "Device")


def test_domain_slot_and_unnamed_device_id_from_plain_output():
    (device,) = parse_lspci(fixture("vvvv_domain_unnamed_device.txt"))
    assert device.slot == "0004:01:00.0"
    # Without -nn the id still shows in lspci's fallback name "Device 25b2".
    assert (device.vendor_id, device.device_id, device.name) == (None, "25b2", "Device 25b2")


def test_prefixed_lines_with_driver_suffix_and_nvswitch_bridges():
    devices = parse_lspci(fixture("iommu_script_h200_nvswitch.txt"))
    gpus = [d for d in devices if d.is_gpu]
    switches = [d for d in devices if d.is_nvswitch]
    assert len(gpus) == 8
    assert [(d.slot, d.device_id, d.name) for d in switches] == [
        ("05:00.0", "22a3", "GH100 [H100 NVSwitch]"),
        ("06:00.0", "22a3", "GH100 [H100 NVSwitch]"),
    ]


@pytest.mark.parametrize("name", ["plain_debian_vm_no_nvidia.txt", "Dnn_debian_vm_no_nvidia.txt"])
def test_host_without_nvidia_gives_empty_list(name):
    assert parse_lspci(fixture(name)) == []


@pytest.mark.parametrize("text", ["", "\n", "lspci: Unable to load libkmod resources: error -2"])
def test_empty_or_garbage_gives_empty_list(text):
    assert parse_lspci(text) == []


def test_sysfs_lines_without_nvidia_give_empty_list():
    assert parse_sysfs_pci(fixture("sysfs_debian_vm_no_nvidia.txt")) == []


def test_sysfs_line_of_an_nvidia_gpu():
    # The line format is the recorded one (slot, then the vendor, device and class files);
    # the values are an A100's as NCCL's topology dump read them from sysfs:
    # vendor="0x10de" device="0x20b0" class="0x030200" (https://github.com/NVIDIA/nccl/issues/1505).
    recorded = fixture("sysfs_debian_vm_no_nvidia.txt").splitlines()[0].split()
    assert recorded[1:] == ["0x8086", "0x0d57", "0x060000"]
    line = " ".join(["0000:07:00.0", "0x10de", "0x20b0", "0x030200"])
    assert parse_sysfs_pci(line) == [
        PciDevice(
            slot="0000:07:00.0",
            device_class="3D controller",
            vendor_id="10de",
            device_id="20b0",
            name="Device 20b0",
        )
    ]


def test_lspci_and_sysfs_parsers_ignore_each_others_lines():
    lspci_text = fixture("nn_dgx_h200.txt")
    assert parse_sysfs_pci(lspci_text) == []
    assert parse_lspci("0000:1b:00.0 0x10de 0x2335 0x030200") == []


def test_to_dict_round_trips_field_names():
    (device,) = parse_lspci(fixture("nn_prog_if.txt"))
    assert device.to_dict() == {
        "slot": "01:00.0",
        "device_class": "VGA compatible controller",
        "vendor_id": "10de",
        "device_id": "2206",
        "name": "GA102 [GeForce RTX 3080]",
    }
