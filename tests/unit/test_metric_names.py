"""Every metric gpufleet writes: its name ends in a Prometheus base unit (or is a count/state),
and each old-unit name is written beside its base-unit twin."""

from __future__ import annotations

import re

from gpufleet.cluster.output import prometheus_text
from gpufleet.report.metric_units import RENAMED, base_unit_problem
from tests.conftest import REPO_ROOT

FAMILY = re.compile(r'[Ff]amily\(\s*"(gpufleet_[a-z0-9_]+)"')


def written_names() -> set[str]:
    names: set[str] = set()
    for folder in ("gpufleet", "validation"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            names.update(FAMILY.findall(path.read_text()))
    return names


def test_every_metric_keeps_the_unit_convention() -> None:
    names = written_names()
    assert len(names) > 40  # the scan finds the families, not nothing
    assert [p for p in map(base_unit_problem, sorted(names)) if p] == []
    assert set(RENAMED) <= names  # every alias is still written


def parse(text: str) -> dict[str, list[tuple[str, float]]]:
    series: dict[str, list[tuple[str, float]]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            selector, value = line.rsplit(" ", 1)
            name, _, labels = selector.partition("{")
            series.setdefault(name, []).append((labels, float(value)))
    return series


def test_old_units_come_with_their_base_unit_twins() -> None:
    # review §4.6: _gbps was Gbit/s in one name and GB/s in the next, latency in _ms
    doc = {
        "group": "g",
        "run_id": "r",
        "status": "pass",
        "culprits": [],
        "network": {"links": [{"source": "a", "target": "b", "gbps": 9.5, "latency_ms": 0.25}]},
        "nccl_tests": {"figures": {"max_busbw_gbps": 12.5, "network": "socket"}},
    }
    text = prometheus_text(doc, "a")
    series = parse(text)
    assert series["gpufleet_cluster_link_bits_per_second"][0][1] == 9.5e9
    assert series["gpufleet_cluster_link_gbps"][0][1] == 9.5
    assert series["gpufleet_cluster_link_latency_seconds"][0][1] == 0.00025
    assert series["gpufleet_cluster_nccl_busbw_bytes_per_second"][0][1] == 12.5e9
    assert (
        "# HELP gpufleet_cluster_link_gbps iperf3 TCP throughput from this host, Gbit/s "
        "Deprecated alias of gpufleet_cluster_link_bits_per_second" in text
    )
    # same labels on both names
    assert (
        series["gpufleet_cluster_link_gbps"][0][0]
        == (series["gpufleet_cluster_link_bits_per_second"][0][0])
    )


def test_per_gpu_series_carry_dcgm_exporters_labels() -> None:
    # review §4.6: gpu/name/uuid did not join DCGM exporter's UUID/modelName
    import json

    from gpufleet.report import prometheus

    doc = json.loads((REPO_ROOT / "tests/fixtures/results/validate-local-quick.json").read_text())
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1f2e", "pci_bus_id": "00000000:1B:00.0"}
    doc["gpu_health"] = {"gpus": [{**gpu, "temperature_c": 41}], "findings": []}
    (labels, value) = parse(prometheus.render(doc))["gpufleet_gpu_temperature_celsius"][0]
    assert value == 41
    assert 'UUID="GPU-1f2e"' in labels and 'modelName="NVIDIA H100 80GB HBM3"' in labels
    assert 'uuid="GPU-1f2e"' in labels  # the old label names stay
