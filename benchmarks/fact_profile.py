"""The pyinfra CLI with every fact round trip timed by the gpufleet stage that asked for it.

    python benchmarks/fact_profile.py PROFILE.json -y inventories/sandbox.py deploy/gpu_node.py

Runs ``pyinfra ARGS...`` unchanged in this process and, at exit, writes PROFILE.json: seconds
and calls per stage (``host.current_deploy_name``, e.g. "gpufleet driver"; facts read outside
any stage, such as the host probe of ``node_plan()``, count as "(before the stages)") and per
fact within each stage, plus SSH connection time. benchmarks/sandbox_deploy.py prints it when
a target is missed, so that the output says which stage's facts cost the time.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from pyinfra.api import facts as pyinfra_facts
from pyinfra.api.host import Host
from pyinfra_cli.main import main as pyinfra_main

OUTSIDE = "(before the stages)"


def install(out: Path) -> None:
    """Wrap pyinfra's fact getter and connect; write the totals to ``out`` at exit."""
    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    connect = {"seconds": 0.0, "hosts": 0}
    get_fact, host_connect = pyinfra_facts._get_fact, Host.connect

    def timed_connect(self: Host, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return host_connect(self, *args, **kwargs)
        finally:
            connect["seconds"] += time.perf_counter() - started
            connect["hosts"] += 1

    def timed_get_fact(state: Any, host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        stage = host.current_deploy_name or OUTSIDE
        before = connect["seconds"]
        started = time.perf_counter()
        try:
            return get_fact(state, host, cls, *args, **kwargs)
        finally:
            # The first fact of a host opens its connection: counted apart.
            spent = time.perf_counter() - started - (connect["seconds"] - before)
            seconds[stage][cls.__name__] += spent
            calls[stage][cls.__name__] += 1

    def write() -> None:
        stages = {
            stage: {
                "seconds": round(sum(facts.values()), 3),
                "calls": sum(calls[stage].values()),
                "facts": {
                    name: {"seconds": round(value, 3), "calls": calls[stage][name]}
                    for name, value in sorted(facts.items(), key=lambda item: -item[1])
                },
            }
            for stage, facts in seconds.items()
        }
        totals = {stage: -sum(facts.values()) for stage, facts in seconds.items()}
        document = {
            "connect_seconds": round(connect["seconds"], 3),
            "connections": connect["hosts"],
            "stages": {name: stages[name] for name in sorted(stages, key=totals.__getitem__)},
        }
        out.write_text(json.dumps(document, indent=2) + "\n")

    setattr(pyinfra_facts, "_get_fact", timed_get_fact)  # noqa: B010 (a private name)
    setattr(Host, "connect", timed_connect)  # noqa: B010
    atexit.register(write)


def summary(path: Path, top: int = 3) -> list[str]:
    """Lines naming the stages whose facts cost the most, each with its costliest facts."""
    document = json.loads(path.read_text())
    lines = [
        f"  SSH connections: {document['connect_seconds']:.1f} s for {document['connections']}"
    ]
    for stage, entry in list(document["stages"].items())[:top]:
        facts = ", ".join(
            f"{name} {fact['seconds']:.2f} s/{fact['calls']}"
            for name, fact in list(entry["facts"].items())[:top]
        )
        lines.append(
            f"  {stage}: facts {entry['seconds']:.2f} s summed over hosts, "
            f"{entry['calls']} calls ({facts})"
        )
    return lines


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python benchmarks/fact_profile.py PROFILE.json PYINFRA-ARGS...")
    install(Path(sys.argv[1]))
    sys.argv = ["pyinfra", *sys.argv[2:]]
    sys.exit(pyinfra_main())
