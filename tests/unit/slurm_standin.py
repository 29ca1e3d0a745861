"""Stand-in Slurm for the `validate --scheduler slurm` unit tests: sbatch, sacct and scancel
as the submit host's Runner, with the runs and result tarballs those tests share."""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from gpufleet.inventory import InventoryHost
from gpufleet.report.schema import new_document
from gpufleet.validate.hostrun import HostRun

RUN_ID = "20261201T120000Z-abc123"


def results_tar(host: str, status: str) -> bytes:
    check = {
        "name": "host_state::os_supported",
        "status": status,
        "message": "m",
        "figures": {},
        "duration_s": 0.1,
    }
    document = new_document(
        host=host,
        run_id=RUN_ID,
        started_at="t",
        tier="quick",
        target="local://",
        spec={},
        checks=[check],
        workloads=[],
        gpu_health=None,
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("results.json", json.dumps(document).encode()), ("exit", b"0\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class StandInSlurm:
    """sbatch, sacct and scancel on the submit host, as the Runner the jobs use."""

    def __init__(self, states: dict[str, list[str]]) -> None:
        self.states = states  # per node, sacct's answer at each poll (the last one repeats)
        self.jobs: dict[str, str] = {}
        self.calls: list[list[str]] = []
        self.polls = 0

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if argv[:2] == ["sh", "-c"]:
            nodes = re.findall(r"--nodelist=(\S+)", argv[2])
            self.jobs.update({n: str(4200 + i) for i, n in enumerate(nodes)})
            return 0, "".join(f"{n}\t{self.jobs[n]}\n" for n in nodes)
        if argv[0] == "sacct":
            self.polls += 1
            lines = []
            for node, seen in self.states.items():
                state = seen[min(self.polls - 1, len(seen) - 1)]
                if self.jobs[node] in argv[-1].split(","):
                    lines.append(f"{self.jobs[node]}|{state}|{node}")
            return 0, "\n".join(lines) + "\n"
        if argv[0] == "scancel":
            return 0, ""
        return 1, f"unexpected {argv}"


def run_arguments(runs: Sequence[HostRun], finished: Callable[[str], object]) -> dict:
    """SlurmJobs.run's keywords for a quick run of ``runs``, ``finished`` told each name."""
    return {
        "tier": "quick",
        "run_id": RUN_ID,
        "started_at": "t",
        "select": {r.alias: None for r in runs},
        "checks": (),
        "asked": None,
        "finished": lambda run: finished(run.host.name),
    }


def make_runs(tmp_path: Path, names: Sequence[str]) -> list[HostRun]:
    runs = []
    for index, name in enumerate(names):
        stem = tmp_path / f"{index:03d}"
        run = HostRun(
            InventoryHost(name, "ssh", f"10.0.0.{index + 1}"),
            f"gpufleet-{index:03d}",
            Path(f"{stem}.exp.json"),
            Path(f"{stem}.results.json"),
            Path(f"{stem}.junit.xml"),
            Path(f"{stem}.log"),
        )
        run.expectations_path.write_text(json.dumps({"host": name}))
        runs.append(run)
    return runs
