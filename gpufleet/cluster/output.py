"""The cluster run for people and tools: terminal table, JSON, JUnit, HTML, Prometheus."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.cluster.config import ClusterHost
from gpufleet.cluster.launcher import Launcher
from gpufleet.report.prometheus import Family, format_families
from gpufleet.text import redact

TEXTFILE = "gpufleet-cluster.prom"


def training_check(section: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        k: section[k]
        for k in ("identical_weights", "max_weight_diff_vs_single", "loss_rel_diff_vs_single")
        if k in section
    }
    figures["speed"] = section.get("speed", {}).get("status", "not run")
    return {
        "name": "training::multi_worker_mirrored",
        "status": section["status"],
        "reason": section["reason"],
        "figures": figures,
    }


def nccl_check(section: dict[str, Any]) -> dict[str, Any]:
    """The NCCL part as a check: its headline figures (the section keeps them all)."""
    figures = section.get("figures", {})
    keys = ("max_busbw_gbps", "network", "ranks", "fabric_gbps")
    shown = {k: figures[k] for k in keys if figures.get(k) is not None}
    floors = [f for f in figures.get("floors", []) if f["enforced"]]
    if floors:
        shown["floor_gbps"] = max(f["busbw_gbps"] for f in floors)
    return {
        "name": "nccl_tests::all_reduce_perf",
        "status": section["status"],
        "reason": section["reason"],
        "figures": shown,
    }


def finish(doc: dict[str, Any]) -> None:
    """The run's status: error when it broke or left something behind, else from its checks."""
    left = {h: s for h, s in doc["cleanup"].items() if s != "clean"}
    if left and not doc["run_error"]:
        doc["run_error"] = "left behind after the run: " + "; ".join(
            f"{h}: {s}" for h, s in left.items()
        )
    statuses = {c["status"] for c in doc["checks"]}
    if doc["run_error"] or "error" in statuses:
        doc["status"] = "error"
    else:
        doc["status"] = "fail" if "fail" in statuses else "pass"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "group"


def junit(doc: dict[str, Any]) -> ET.Element:
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name=f"cluster:{doc['group']}")
    failures = 0
    for check in doc["checks"]:
        case = ET.SubElement(suite, "testcase", classname="cluster", name=check["name"])
        if check["status"] in ("fail", "error"):
            failures += 1
            ET.SubElement(case, "failure", message=redact(check["reason"])[:500])
        elif check["status"] == "skipped":
            ET.SubElement(case, "skipped", message=redact(check["reason"]))
    for entry in doc["culprits"]:
        case = ET.SubElement(
            suite, "testcase", classname="cluster", name=f"culprit::{entry['check']}"
        )
        names = ", ".join(entry["hosts"]) or "none isolated"
        ET.SubElement(case, "failure", message=f"named: {names} ({entry['how']})")
        failures += 1
    if doc["run_error"]:
        case = ET.SubElement(suite, "testcase", classname="cluster", name="run")
        ET.SubElement(case, "error", message=redact(doc["run_error"])[:500])
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    return suites


def write_all(doc: dict[str, Any], results_dir: Path, junit_xml: Path | None) -> dict[str, Path]:
    """Write the group's JSON, JUnit XML and HTML; their paths."""
    from gpufleet.cluster.html import render_html

    folder = results_dir / "cluster" / _safe(doc["group"])
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": folder / f"{doc['run_id']}.json",
        "html": folder / f"{doc['run_id']}.html",
        "junit": junit_xml or results_dir / "junit" / f"cluster-{doc['run_id']}.xml",
    }
    paths["json"].write_text(redact(json.dumps(doc, indent=2)))
    paths["junit"].parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(junit(doc)).write(paths["junit"], encoding="utf-8", xml_declaration=True)
    paths["html"].write_text(render_html(doc))
    return paths


def prometheus_text(doc: dict[str, Any], host: str) -> str:
    """The figures of ``host``'s links and of the group run, as textfile metrics."""
    up = Family("gpufleet_cluster_ok", "1 when the host's last cluster-tier group run passed")
    gbps = Family("gpufleet_cluster_link_gbps", "iperf3 TCP throughput from this host, Gbit/s")
    latency = Family("gpufleet_cluster_link_latency_ms", "ping RTT from this host, ms")
    named = Family("gpufleet_cluster_culprit", "1 when the last group run named this host")
    labels = {"group": doc["group"], "run_id": doc["run_id"]}
    up.add(doc["status"] == "pass", **labels)
    for link in (doc.get("network") or {}).get("links", []):
        if link["source"] == host:
            gbps.add(link["gbps"], peer=link["target"], **labels)
            if link.get("latency_ms") is not None:
                latency.add(link["latency_ms"], peer=link["target"], **labels)
    named.add(any(host in c["hosts"] for c in doc["culprits"]), **labels)
    busbw = Family(
        "gpufleet_cluster_nccl_busbw_gbps", "all_reduce_perf max busbw of the group, GB/s"
    )
    figures = (doc.get("nccl_tests") or {}).get("figures") or {}
    if figures.get("max_busbw_gbps") is not None:
        busbw.add(figures["max_busbw_gbps"], network=str(figures.get("network")), **labels)
    return format_families([up, gbps, latency, named, busbw])


def push_prometheus(launcher: Launcher, hosts: Sequence[ClusterHost], doc: dict) -> list[str]:
    """Replace each host's textfile atomically (hosts with node_exporter on); problems said."""
    problems = []
    for host in hosts:
        if host.textfile_dir is None:
            continue
        d = shlex.quote(host.textfile_dir)
        script = (
            f't=$(mktemp {d}/.{TEXTFILE}.XXXXXX) && cat > "$t" && chmod 644 "$t" '
            f'&& mv -f "$t" {d}/{TEXTFILE}'
        )
        if host.sudo:
            script = f"sudo -n sh -c {shlex.quote(script)}"
        status, _out, err = launcher.run(host, script, stdin=prometheus_text(doc, host.name))
        if status != 0:
            problems.append(f"prometheus textfile on {host.name} not written: {err.strip()[:200]}")
    return problems


def print_group(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpufleet.report.terminal import STATUS_STYLES, format_figures
    from gpufleet.text import cell

    title = cell(
        f"group {doc['group']} ({len(doc['hosts'])} hosts) — cluster tier — {doc['status']}"
    )
    table = Table(title=title, title_justify="left")
    for column in ("status", "check", "message", "figures"):
        table.add_column(column)
    for check in doc["checks"]:
        style = STATUS_STYLES.get(check["status"], "")
        table.add_row(
            cell(check["status"], style=style),
            cell(check["name"]),
            cell(check["reason"]),
            cell(format_figures(check["figures"])),
        )
    for entry in doc["culprits"]:
        names = ", ".join(entry["hosts"]) or "none isolated"
        table.add_row(
            cell("fail", style="bold red"),
            cell(f"culprit::{entry['check']}"),
            cell(f"named: {names}"),
            cell(entry["how"]),
        )
    if doc["run_error"]:
        table.add_row(
            cell("error", style="bold magenta"), cell("run"), cell(doc["run_error"]), cell("")
        )
    Console(width=160).print(table)
