"""`gpufleet validate INVENTORY --tier cluster`: the group's network, its job, the culprit."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufleet.cluster import culprit, firewall, nccl, network, training
from gpufleet.cluster.config import PORTS, ClusterError, ClusterHost, cluster_host, group_name
from gpufleet.cluster.launcher import Launcher
from gpufleet.cluster.schema import new_document, validate_cluster_results
from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.text import plain
from gpufleet.validate.runner import _output_problem, _write_private, new_run_id
from gpufleet.validate.ssh import host_problem, ssh_config_text


def _interrupted(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _group(args: argparse.Namespace) -> tuple[list[InventoryHost], list[ClusterHost], str]:
    inventory_hosts = load_hosts(args.inventory, args.limit)
    if len(inventory_hosts) < 2:
        raise ClusterError(
            f"the cluster tier needs 2 or more hosts; {args.inventory} "
            f"{'with --limit ' + ' '.join(args.limit) if args.limit else ''} gives "
            f"{len(inventory_hosts)}"
        )
    hosts = []
    for index, host in enumerate(inventory_hosts):
        why = "" if host.is_local else host_problem(host)
        if why:
            raise ClusterError(why)
        hosts.append(cluster_host(host, f"gpufleet-{index:03d}"))
    return inventory_hosts, hosts, group_name(inventory_hosts, args.limit)


def network_checks(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": f"network::{link['source']}->{link['target']}",
            "status": link["status"],
            "reason": link["reason"],
            "figures": {
                "gbps": link["gbps"],
                "floor_gbps": link["floor_gbps"],
                "latency_ms": link["latency_ms"],
                "interface": link["interface"],
                "mtu": link["mtu"],
            },
        }
        for link in section["links"]
    ]


def network_culprits(hosts: list[ClusterHost], section: dict[str, Any]) -> tuple[list[str], str]:
    """Name the host behind failing links (a pair fails when either direction fails)."""
    by_name = {h.name: h for h in hosts}
    passed: dict[frozenset[str], bool] = {}
    for link in section["links"]:
        key = frozenset((link["source"], link["target"]))
        passed[key] = passed.get(key, True) and link["status"] == "pass"
    outcomes = [
        ((by_name[a], by_name[b]), ok)
        for (a, b), ok in ((tuple(sorted(k)), v) for k, v in passed.items())
    ]

    def probe(a: ClusterHost, b: ClusterHost) -> bool:
        return passed.get(frozenset((a.name, b.name)), False)

    named, how = culprit.find_culprits(hosts, probe, outcomes)
    return [h.name for h in named], how


def training_section(
    launcher: Launcher, hosts: list[ClusterHost], steps: int
) -> tuple[dict[str, Any], list[str], str]:
    step = training.STEP
    group = training.run_job(launcher, hosts, steps=steps, step=step)
    single = training.JobOutcome({})  # no reference to compare a failed job with
    if not group.failure:
        single = training.run_job(launcher, hosts, steps=steps, step=step, reference=True)
    section = training.judge(group, single, hosts)
    if section["status"] != "fail":
        return section, [], ""
    if section.get("named"):
        return section, [section["named"]], "the first worker to fail, or the odd one out"

    def probe(a: ClusterHost, b: ClusterHost) -> bool:
        pair = [a, b]
        result = training.judge(
            training.run_job(launcher, pair, steps=steps, step=step),
            training.run_job(launcher, pair, steps=steps, step=step, reference=True),
            pair,
        )
        return bool(result["status"] == "pass")

    named, how = culprit.find_culprits(hosts, probe)
    return section, [h.name for h in named], how


REACH_TIMEOUT_S = 20
NOT_REACHED = "not reached: nothing was started there"


def unreachable(launcher: Launcher, hosts: list[ClusterHost]) -> dict[str, str]:
    """Per host that does not answer one ``true`` over SSH, why; asked of every host at once,
    before anything is measured, so a host that is down is named and no other is blamed."""

    def reach(host: ClusterHost) -> tuple[str, str]:
        status, _out, err = launcher.run(host, "true", timeout=REACH_TIMEOUT_S)
        lines = [line for line in err.strip().splitlines() if line.strip()]
        return host.name, "" if status == 0 else (lines[-1] if lines else f"ssh exit {status}")

    with ThreadPoolExecutor(max_workers=min(16, len(hosts)) or 1) as pool:
        return {name: why for name, why in pool.map(reach, hosts) if why}


def _stopped(doc: dict[str, Any], kind: str, reasons: dict[str, str], run_error: str) -> None:
    """The run stopped before measuring: one ``<kind>::<host>`` error check per host."""
    doc["checks"] += [
        {"name": f"{kind}::{name}", "status": "error", "reason": why, "figures": {}}
        for name, why in reasons.items()
    ]
    doc["run_error"] = run_error


def _not_reached(doc: dict[str, Any], down: dict[str, str]) -> None:
    _stopped(
        doc,
        "reach",
        {name: f"could not reach {name}: {why}" for name, why in down.items()},
        f"could not reach {', '.join(down)}; nothing was measured and no host is blamed. Fix: "
        "check that each is up and its ssh_hostname and ssh_key, or leave it out with --limit",
    )


def _not_guarded(doc: dict[str, Any], failed: dict[str, str]) -> None:
    port = "could not limit the TF worker port"
    _stopped(
        doc,
        "firewall",
        {name: f"{port} of {name} to the group: {why}" for name, why in failed.items()},
        f"{port} on {', '.join(failed)} to the group's addresses; nothing was started "
        "(TensorFlow's workers serve anyone who reaches the port). Fix: install nftables "
        "there and let the SSH user run `sudo -n nft` (_sudo: True), or run as root",
    )


def measure_group(
    launcher: Launcher, hosts: list[ClusterHost], doc: dict[str, Any], steps: int
) -> None:
    """The network, the job and nccl-tests, each with its culprit search, into ``doc``."""
    from gpufleet.cluster import output

    doc["network"] = network.measure(launcher, hosts)
    doc["checks"] += network_checks(doc["network"])
    named, how = network_culprits(hosts, doc["network"])
    if named or any(c["status"] == "fail" for c in doc["checks"]):
        doc["culprits"].append({"check": "network", "hosts": named, "how": how})
    doc["training"], named, how = training_section(launcher, hosts, steps)
    doc["checks"].append(output.training_check(doc["training"]))
    if doc["training"]["status"] == "fail":
        doc["culprits"].append({"check": "training", "hosts": named, "how": how})
    doc["nccl_tests"], named, how = nccl.section(launcher, hosts)
    doc["checks"].append(output.nccl_check(doc["nccl_tests"]))
    if doc["nccl_tests"]["status"] == "fail":
        doc["culprits"].append({"check": "nccl_tests", "hosts": named, "how": how})


def run_group(
    launcher: Launcher, hosts: list[ClusterHost], *, group: str, run_id: str, steps: int
) -> dict[str, Any]:
    """The group's network, its job, nccl-tests, culprits and clean-up: the results document."""
    doc = new_document(run_id=run_id, group=group, hosts=hosts, started_at=_now())
    previous = signal.signal(signal.SIGTERM, _interrupted)  # a CI timeout cleans up too
    down: dict[str, str] = {}
    guarded: list[ClusterHost] = []
    try:
        down = unreachable(launcher, hosts)
        if down:
            _not_reached(doc, down)
        else:
            guarded = list(hosts)  # a table half added is deleted too
            unguarded = firewall.guard(launcher, hosts, run_id)
            if unguarded:
                _not_guarded(doc, unguarded)
            else:
                measure_group(launcher, hosts, doc, steps)
    except KeyboardInterrupt:
        doc["run_error"] = "interrupted; the job was stopped on every host"
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up itself runs to its end
        up = [h for h in hosts if h.name not in down]
        doc["cleanup"] = {**launcher.cleanup(up, PORTS), **dict.fromkeys(down, NOT_REACHED)}
        for name, why in firewall.unguard(launcher, guarded, run_id).items():
            was = doc["cleanup"].get(name, "clean")
            doc["cleanup"][name] = why if was == "clean" else f"{was}; {why}"
        signal.signal(signal.SIGTERM, previous)
    return _finished(doc)


def _finished(doc: dict[str, Any]) -> dict[str, Any]:
    from gpufleet.cluster import output

    doc["finished_at"] = _now()
    output.finish(doc)
    validate_cluster_results(doc)
    return doc


def run(args: argparse.Namespace) -> int:
    """Run the cluster tier on the inventory's (or --limit's) group; the code of exit_status."""
    from gpufleet.cluster import output

    try:
        inventory_hosts, hosts, group = _group(args)
    except (InventoryError, ClusterError) as exc:
        print(plain(f"gpufleet validate --tier cluster: {exc}"), file=sys.stderr)
        return 2
    run_id = new_run_id()
    problem = _output_problem(args, run_id)
    if problem:
        print(plain(f"gpufleet validate: {problem}"), file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="gpufleet-cluster-"))
    config = workdir / "ssh_config"
    pairs = [(h.alias, ih) for h, ih in zip(hosts, inventory_hosts, strict=True)]
    _write_private(config, ssh_config_text(pairs, control_dir=workdir))
    launcher = Launcher(config, run_id)
    try:
        doc = run_group(launcher, hosts, group=group, run_id=run_id, steps=args.cluster_steps)
        paths = output.write_all(doc, args.results_dir, args.junit_xml)
        reached = [h for h in hosts if doc["cleanup"].get(h.name) != NOT_REACHED]
        prom = output.push_prometheus(launcher, reached, doc)
    except OSError as exc:
        print(plain(f"gpufleet validate: cannot write results ({exc})"), file=sys.stderr)
        return 2
    finally:
        launcher.close(hosts)
        shutil.rmtree(workdir, ignore_errors=True)
    output.print_group(doc)
    print(plain(f"results: {paths['json']}  junit: {paths['junit']}  html: {paths['html']}"))
    for line in prom:
        print(plain(line))
    return exit_status(doc)


def exit_status(doc: dict[str, Any]) -> int:
    """validate's codes (docs/reference/exit-codes.md): 3 when a host could not be reached, as
    the quick and full tiers say it, else 0 pass, 1 fail, 2 error."""
    if NOT_REACHED in (doc.get("cleanup") or {}).values():
        return 3
    return {"pass": 0, "fail": 1}.get(doc["status"], 2)
