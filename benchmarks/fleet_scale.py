"""The control node's cost per host, measured on the sandbox and projected to a large fleet.

    gpufleet sandbox up --hosts 6 --slurm                       # root
    pyinfra -y inventories/sandbox.py deploy/gpu_node.py --parallel 6   # provision them
    python benchmarks/fleet_scale.py --hosts 1,3,6 --save fleet_scale.json
    python benchmarks/fleet_scale.py --dry-plan [--from fleet_scale.json]

For each host count (``--limit`` to the first N hosts) and command (a deploy no-op, `gpufleet
drift --no-validation`, `gpufleet validate --tier quick` over SSH and as Slurm jobs) it runs
the command once and measures what the control node spends: CPU seconds of the command and
everything it waited for (getrusage RUSAGE_CHILDREN), the peak RSS of its process tree, the
peak number of ssh client processes and of open files (sampled from /proc every 0.2 s), and
the wall time. Then it fits each figure as fixed + per-host * N and projects 100, 1,000 and
5,000 hosts (benchmarks/fleet_scale_model.py, the formula printed with it), against this
machine's ulimit -n, cores and memory. ``--dry-plan`` prints the commands (and, with
``--from``, the projection of saved figures) without a sandbox. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import fleet_scale_model as model  # noqa: E402  (benchmarks/, beside this script)

INVENTORY = "inventories/sandbox.py"
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
GPUFLEET = [sys.executable, "-m", "gpufleet.cli"]


def commands(hosts: int, results: Path) -> dict[str, list[str]]:
    """What is measured on the first ``hosts`` sandbox hosts."""
    limits = [a for n in range(1, hosts + 1) for a in ("--limit", f"gfsb-h{n}")]
    validate = [*GPUFLEET, "validate", INVENTORY, "--tier", "quick", "-q", *limits]
    validate += ["--results-dir", str(results)]
    return {
        "deploy no-op": [PYINFRA, "-y", INVENTORY, "deploy/gpu_node.py", *limits],
        "drift --no-validation": [*GPUFLEET, "drift", INVENTORY, "--no-validation", *limits],
        "validate (SSH)": [*validate, "--scheduler", "none"],
        "validate (Slurm)": [*validate, "--scheduler", "slurm"],
    }


POOLS = {"validate (SSH)": model.VALIDATE_POOL}
# Slurm jobs run on every node at once; their results are fetched --parallel (64) at a time.
SESSIONS = {"validate (Slurm)": model.VALIDATE_POOL}


def snapshot() -> list[model.Proc]:
    """Every process this user can see, with its RSS and open file count."""
    procs = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            pid, ppid, comm = model.parse_stat(Path(entry.path, "stat").read_text())
            rss = model.parse_rss_kib(Path(entry.path, "status").read_text())
            fds = len(os.listdir(Path(entry.path, "fd")))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        procs.append(model.Proc(pid, ppid, comm, rss, fds))
    return procs


def measure(hosts: int, argv: list[str]) -> model.Sample:
    """Run ``argv`` once; its control-node cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    child = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    peaks = {"rss": 0, "ssh": 0, "fds": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            tree = model.descendants(snapshot(), child.pid)
            peaks["rss"] = max(peaks["rss"], sum(p.rss_kib for p in tree))
            peaks["ssh"] = max(peaks["ssh"], model.ssh_sessions(tree))
            peaks["fds"] = max(peaks["fds"], sum(p.fds for p in tree))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _out, err = child.communicate()
    done.set()
    sampler.join()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode not in (0, 1, 3):  # 1 and 3: validate's verdicts, still measured
        print(f"  {argv[0]} ... exited {child.returncode}: {err[-1500:]}", file=sys.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return model.Sample(hosts, cpu, peaks["rss"] / 1024, peaks["ssh"], peaks["fds"], wall)


def machine() -> tuple[int, int, float]:
    """(ulimit -n, cores, memory MiB) of this control node."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return soft, os.cpu_count() or 1, pages / 2**20


def print_projection(measured: dict[str, list[model.Sample]]) -> None:
    fd_limit, cpus, memory = machine()
    print(f"\ncontrol node: ulimit -n {fd_limit}, {cpus} cores, {memory:.0f} MiB")
    print(f"formula: {model.FORMULA}\n")
    for name, samples in measured.items():
        projections = {
            n: model.project(
                samples,
                n,
                pool=POOLS.get(name),
                sessions=SESSIONS.get(name),
                fd_limit=fd_limit,
                cpus=cpus,
                memory_mib=memory,
            )
            for n in model.PROJECTED
        }
        print("\n".join(model.report(name, samples, projections)))
    print(
        "\nWhere a row says a limit is passed, run one control process per inventory group "
        "or rack in parallel (docs/explanation/fleet-scale.md)."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,3,6", help="host counts (default 1,3,6)")
    parser.add_argument("--save", type=Path, help="write the measured figures as JSON")
    parser.add_argument("--dry-plan", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--from", dest="saved", type=Path, help="figures saved by --save")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.hosts.split(",") if n.strip()})
    results = Path("/tmp/gpufleet-fleet-scale-results")
    if args.dry_plan:
        for hosts in counts:
            for name, argv in commands(hosts, results).items():
                print(f"{hosts} hosts, {name}: {' '.join(argv)}")
        if args.saved:
            saved = json.loads(args.saved.read_text())
            print_projection({k: [model.Sample(**s) for s in v] for k, v in saved.items()})
        return 0
    from gpufleet.sandbox.state import SandboxError, load_state

    try:
        state = load_state()
    except SandboxError as exc:
        print(
            f"no sandbox is up ({exc}); start one (root): gpufleet sandbox up --hosts "
            f"{max(counts)} --slurm, then deploy it (see this script's docstring)"
        )
        return 2
    if len(state.hosts) < max(counts):
        print(f"the sandbox has {len(state.hosts)} hosts; --hosts asks for {max(counts)}")
        return 2
    measured: dict[str, list[model.Sample]] = {}
    for hosts in counts:
        for name, argv in commands(hosts, results).items():
            sample = measure(hosts, argv)
            print(f"{hosts} hosts, {name}: {sample}", flush=True)
            measured.setdefault(name, []).append(sample)
    if args.save:
        args.save.write_text(
            json.dumps({k: [asdict(s) for s in v] for k, v in measured.items()}, indent=2)
        )
    print_projection(measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
