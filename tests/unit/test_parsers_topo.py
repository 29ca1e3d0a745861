"""`nvidia-smi topo -m` parser on real recorded matrices (sources in
tests/fixtures/topo/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.parsers import parse_nvidia_smi_topo
from gpufleet.parsers.topo import TopoParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
ALL = sorted(p.name for p in FIXTURES.glob("*.txt"))


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_names_its_source():
    sources = fixture("SOURCES.md")
    assert len(ALL) >= 6
    missing = [name for name in ALL if f"| {name} |" not in sources]
    assert not missing, f"SOURCES.md does not name the source of {missing}"


# fixture -> (gpus, nics, one GPU-GPU link, one GPU-NIC pair and link, GPU0 CPU/NUMA affinity)
CASES = {
    "a100-8gpu-nv12-17nic.txt": (
        8,
        17,
        ("GPU3", "GPU6", "NV12"),
        ("GPU4", "NIC8", "PXB"),
        ("0-103", "0"),
    ),
    "h100-8gpu-nv18-tabs-excerpt.txt": (
        8,
        9,
        ("GPU0", "GPU7", "NV18"),
        ("GPU0", "NIC8", "PIX"),
        ("0-79", "0"),
    ),
    "rtx4090-8gpu-tabs-no-legend.txt": (
        8,
        2,
        ("GPU1", "GPU6", "SYS"),
        ("GPU6", "NIC0", "PHB"),
        ("0-55,112-167", "0"),
    ),
    "a10-4gpu-2nic.txt": (4, 2, ("GPU0", "GPU3", "SYS"), ("GPU2", "NIC1", "SYS"), ("0-127", "0")),
    "gtx1080ti-2gpu-phb.txt": (2, 0, ("GPU0", "GPU1", "PHB"), None, ("0-11", None)),
    "t4-4gpu-cpu-affinity-only.txt": (4, 0, ("GPU1", "GPU2", "NODE"), None, ("0-15,32-47", None)),
}


@pytest.mark.parametrize("name", ALL)
def test_real_matrices(name):
    n_gpus, n_nics, (a, b, gpu_link), nic_case, (cpu, numa) = CASES[name]
    topo = parse_nvidia_smi_topo(fixture(name))
    assert topo.gpus == [f"GPU{i}" for i in range(n_gpus)]
    assert len(topo.nics) == n_nics
    assert topo.link(a, b) == gpu_link
    assert topo.link(b, a) == gpu_link  # symmetric
    assert topo.link(a, a) == "X"
    if nic_case:
        gpu, nic, nic_link = nic_case
        assert topo.link(gpu, nic) == nic_link
    assert topo.cpu_affinity["GPU0"] == cpu
    assert topo.numa_affinity.get("GPU0") == numa


def test_all_pairs_nvlinked_on_dgx_a100():
    topo = parse_nvidia_smi_topo(fixture("a100-8gpu-nv12-17nic.txt"))
    counts = {topo.nvlinks(i, j) for i in range(8) for j in range(8) if i != j}
    assert counts == {12}
    assert topo.nic_names["NIC0"] == "mlx5_2"
    assert topo.nic_names["NIC16"] == "mlx5_bond_0"
    assert topo.numa_affinity["GPU7"] == "0"


def test_pcie_only_box_has_no_nvlinks():
    topo = parse_nvidia_smi_topo(fixture("rtx4090-8gpu-tabs-no-legend.txt"))
    assert topo.nvlinks(0, 1) == 0
    assert topo.nic_names == {}  # no legend pasted
    # The tab-aligned empty cell before "GPU NUMA ID" does not shift the affinity columns.
    assert topo.cpu_affinity["GPU4"] == "56-111,168-223"
    assert topo.numa_affinity["GPU4"] == "1"


def test_truncated_paste_keeps_what_is_there():
    topo = parse_nvidia_smi_topo(fixture("h100-8gpu-nv18-tabs-excerpt.txt"))
    assert topo.link("NIC6", "GPU2") == "PIX"  # from GPU2's row: NIC6's own row is cut off
    with pytest.raises(KeyError, match="cut short"):
        topo.link("NIC6", "NIC7")


def test_unknown_device_names_the_known_ones():
    topo = parse_nvidia_smi_topo(fixture("gtx1080ti-2gpu-phb.txt"))
    with pytest.raises(KeyError, match="GPU0, GPU1"):
        topo.link(0, 5)


def test_ansi_bold_header_as_on_a_terminal():
    # nvidia-smi wraps the header cells in bold escapes when stdout is a terminal; add them
    # to a real matrix and expect the same result.
    plain = fixture("a10-4gpu-2nic.txt")
    header, rest = plain.split("\n", 1)
    bold = "\x1b[1m" + header.replace("GPU", "\x1b[0m\x1b[1mGPU") + "\x1b[0m"
    assert parse_nvidia_smi_topo(bold + "\n" + rest) == parse_nvidia_smi_topo(plain)


def test_to_dict_is_json():
    topo = parse_nvidia_smi_topo(fixture("h100-8gpu-nv18-tabs-excerpt.txt"))
    data = json.loads(json.dumps(topo.to_dict()))
    assert data["links"]["GPU0"]["GPU1"] == "NV18"


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "",
        "\tGPU0\tCPU Affinity\n",  # header only
    ],
)
def test_not_a_matrix_is_a_clear_error(text):
    with pytest.raises(TopoParseError, match="nvidia-smi topo -m"):
        parse_nvidia_smi_topo(text)
