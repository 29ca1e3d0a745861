"""The group run's document, JUnit, HTML matrix and Prometheus text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.cluster import output
from gpufleet.cluster.config import ClusterHost
from gpufleet.cluster.html import render_html
from gpufleet.cluster.network import judge_link
from gpufleet.cluster.run import network_checks, network_culprits
from gpufleet.cluster.schema import ClusterResultsError, new_document, validate_cluster_results

HOSTS = [
    ClusterHost(n, f"a{i}", f"10.0.0.{i}", "/py", "/p", 1, True, False, "/var/lib/x")
    for i, n in enumerate(("h1", "h2", "h3"), 1)
]


def measured(slow_target: str | None) -> dict:
    links = []
    for a in HOSTS:
        for b in HOSTS:
            if a is b:
                continue
            gbps = 0.09 if b.name == slow_target else 9.0
            link = {"source": a.name, "target": b.name, "gbps": gbps, "latency_ms": 0.05,
                    "loss_pct": 0.0, "interface": "eth0", "mtu": 1500, "error": ""}  # fmt: skip
            links.append(judge_link(link, 1))
    return {"mode": "all_pairs", "margin": 0.7, "latency_max_ms": 1.0,
            "iperf3": {"streams": 4, "seconds": 3, "port": 5201}, "links": links}  # fmt: skip


def document(slow_target: str | None = None) -> dict:
    doc = new_document(run_id="20261201T000000Z-abcdef", group="rack<1>", hosts=HOSTS,
                       started_at="2026-12-01T00:00:00+00:00")  # fmt: skip
    doc["network"] = measured(slow_target)
    doc["checks"] += network_checks(doc["network"])
    named, how = network_culprits(HOSTS, doc["network"])
    if named:
        doc["culprits"].append({"check": "network", "hosts": named, "how": how})
    doc["cleanup"] = {h.name: "clean" for h in HOSTS}
    output.finish(doc)
    return doc


def test_a_slow_host_is_named_from_the_links_into_it() -> None:
    doc = document("h2")
    assert doc["status"] == "fail"
    assert doc["culprits"] == [
        {"check": "network", "hosts": ["h2"], "how": doc["culprits"][0]["how"]}
    ]
    assert document()["status"] == "pass" and document()["culprits"] == []
    validate_cluster_results(doc)


def test_something_left_on_a_host_makes_the_run_an_error() -> None:
    doc = document()
    doc["cleanup"]["h3"] = "left: process 123 python -m validation.cluster.worker"
    output.finish(doc)
    assert doc["status"] == "error" and "h3: left" in doc["run_error"]


def test_junit_has_one_case_per_link_and_the_culprit() -> None:
    suites = output.junit(document("h2"))
    (suite,) = suites.iter("testsuite")
    assert suite.get("name") == "cluster:rack<1>"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert "network::h1->h2" in names and "culprit::network" in names
    assert suite.get("failures") == "3"  # h1->h2, h3->h2, the culprit
    ET.fromstring(ET.tostring(suites))  # well-formed


def test_the_html_matrix_shows_every_link_escaped() -> None:
    page = render_html(document("h2"))
    assert "rack&lt;1&gt;" in page and "rack<1>" not in page
    page = page.split("<h2>Checks")[0]  # the matrix alone
    assert page.count('<td class="fail"') == 2 and page.count('<td class="pass"') == 4
    assert page.count('<td class="self">') == 3


@pytest.mark.parametrize(
    "section",
    [
        {"status": "skipped", "reason": "no GPU"},  # what every GPU-less group writes
        {"status": "error", "reason": "nvidia-smi failed"},
        {"status": "fail", "reason": "ranks cover 1 of 3 hosts", "figures": {"ranks": 8}},
        {
            "status": "pass",
            "reason": "",
            "launcher": "mpirun",
            "figures": {"max_busbw_gbps": 9.5, "network": "ib", "ranks": 16, "transport": {}},
        },
    ],
)
def test_the_html_renders_every_shape_of_the_nccl_section(section: dict) -> None:
    """The page's template is strict: a key a section does not have must not break it."""
    doc = document()
    doc["nccl_tests"] = section
    page = render_html(doc)
    assert ("NCCL all_reduce_perf across the hosts" in page) is ("figures" in section)
    if "max_busbw_gbps" in section.get("figures", {}):
        assert "<td>9.5</td>" in page


def test_prometheus_figures_are_the_hosts_own_links() -> None:
    text = output.prometheus_text(document("h2"), "h1")
    samples = {
        (s.name, s.labels.get("peer")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("gpufleet_cluster_ok", None)] == 0.0
    assert samples[("gpufleet_cluster_link_gbps", "h2")] == pytest.approx(0.09)
    assert samples[("gpufleet_cluster_culprit", None)] == 0.0
    h2 = output.prometheus_text(document("h2"), "h2")
    assert 'gpufleet_cluster_culprit{group="rack<1>",run_id="20261201T000000Z-abcdef"} 1' in h2


def test_results_are_written_beside_each_other(tmp_path: Path) -> None:
    paths = output.write_all(document(), tmp_path, None)
    assert paths["json"].parent == tmp_path / "cluster" / "rack_1_"
    assert paths["junit"].name.startswith("cluster-") and paths["html"].exists()


def test_a_document_off_the_schema_is_refused() -> None:
    doc = document()
    doc["checks"][0]["status"] = "great"
    with pytest.raises(ClusterResultsError, match="great"):
        validate_cluster_results(doc)
    with pytest.raises(ClusterResultsError):
        validate_cluster_results({**document(), "schema_version": 9})
