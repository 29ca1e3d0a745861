"""One GPU run that settles the second GPU review's open questions and writes one JSON.

Run on a host with one NVIDIA GPU and TensorFlow (about 9 minutes)::

    python -m validation.workloads.probe --json probe.json [--gpu 0]

Review 2 §7 names what only a GPU can tell: whether the mixed-precision pairs reach DLE's with
XLA in both arms (N1), whether gradient accumulation's peak memory falls now that its
micro-batches run one after another (N6), ResNet-50's images/s per precision against DLE (§2.2),
whether the XLA-off AMP step at 256 per GPU fits 16 GB (N7), and how busy the reworked input
pipeline keeps the GPU (N4/N5). Each part runs in a process of its own on the chosen GPU
(``CUDA_VISIBLE_DEVICES``), under a share of a budget below 10 minutes; the JSON holds each
part's whole workload document, so a developer can turn it into fixtures. Without a GPU it
refuses, unless ``--smoke`` asks for the same parts at CPU sizes (it proves the script, not the
GPU). This process never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

PROBE_VERSION = 1
BUDGET_S = 570.0  # under 10 minutes on one GPU, with the parent's own seconds to spare
MIN_PART_S = 20.0  # a part given less would be cut off inside TensorFlow's start-up
REFUSAL = 2
TAIL = 4000


@dataclass(frozen=True)
class Part:
    """One child process: the module it runs, its arguments per mode, what it settles."""

    name: str
    module: str
    gpu_args: tuple[str, ...]
    smoke_args: tuple[str, ...]
    seconds: float  # its share of the budget on one H100 (TF start-up and XLA compiles in)
    settles: str


PARTS: tuple[Part, ...] = (
    Part(
        "mixed_precision",
        "validation.workloads.mixed_precision",
        (),
        ("--quick",),
        150,
        "N1: AMP/float (and BF16/float) pairs with XLA in both arms, against DLE's",
    ),
    Part(
        "grad_accumulation",
        "validation.workloads.grad_accumulation",
        (),
        ("--quick",),
        50,
        "N6: peak_extra_mib vs peak_extra_mib_whole with depth-first micro-batches",
    ),
    Part(
        "resnet50_quick",
        "validation.workloads.resnet50",
        ("--quick",),
        ("--quick",),
        60,
        "§2.2: ResNet-50 AMP images/s, quick tier",
    ),
    Part(
        "resnet50",
        "validation.workloads.resnet50",
        (),
        ("--quick",),
        120,
        "§2.2: ResNet-50 images/s per precision at DLE's batch with XLA, against DLE",
    ),
    Part(
        "amp_peak",
        "validation.workloads._probe_peak",
        ("--precision", "amp", "--batch", "256"),
        ("--precision", "fp32", "--batch", "4", "--tiny"),
        50,
        "N7: peak memory of the XLA-off AMP step at 256 per GPU (or its OOM) vs the estimate",
    ),
    Part(
        "input_pipeline",
        "validation.workloads.input_pipeline",
        (),
        ("--quick",),
        90,
        "N4/N5: device_busy_fraction, tuned vs naive, the busy phase's NVML samples",
    ),
)
# (exit code, or None when it timed out; the tail of its stderr). Optional: evaluated at run
# time, and hosts may run Python 3.9.
Runner = Callable[[list[str], dict[str, str], float], tuple[Optional[int], str]]  # noqa: UP045


class ProbeError(RuntimeError):
    """The probe cannot run as asked; the message says why and what to do."""


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(
        prog="python -m validation.workloads.probe", description=__doc__.splitlines()[0]
    )
    out.add_argument("--json", default="probe.json", metavar="PATH", help="where to write")
    out.add_argument("--gpu", type=int, default=0, metavar="INDEX", help="nvidia-smi's index")
    out.add_argument(
        "--smoke", action="store_true", help="no GPU: the same parts at CPU sizes (a script test)"
    )
    out.add_argument(
        "--budget-s", type=float, default=BUDGET_S, help=f"seconds in all (60-{BUDGET_S:g})"
    )
    out.add_argument("--only", action="append", default=None, metavar="PART", help="repeatable")
    return out


def list_gpus() -> list[dict[str, Any]]:
    """nvidia-smi's GPUs as {"index", "name", "memory_mib"}; [] when it is missing or sees none."""
    query = "--query-gpu=index,name,memory.total"
    try:
        done = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_gpus(done.stdout) if done.returncode == 0 else []


def parse_gpus(text: str) -> list[dict[str, Any]]:
    """Rows "0, NVIDIA H100 80GB HBM3, 81559" of nvidia-smi's CSV query."""
    gpus = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[0].isdigit():
            memory = float(cells[2]) if cells[2].replace(".", "", 1).isdigit() else None
            gpus.append({"index": int(cells[0]), "name": cells[1], "memory_mib": memory})
    return gpus


def check_arguments(args: argparse.Namespace, gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The GPU the probe runs on (None in smoke mode), or ProbeError saying what to change."""
    if not 60 <= args.budget_s <= BUDGET_S:
        raise ProbeError(f"--budget-s {args.budget_s:g}: give 60 to {BUDGET_S:g} seconds")
    names = {p.name for p in PARTS}
    unknown = sorted(set(args.only or ()) - names)
    if unknown:
        raise ProbeError(f"--only {', '.join(unknown)}: parts are {', '.join(sorted(names))}")
    folder = Path(args.json).resolve().parent
    if not folder.is_dir():
        raise ProbeError(f"--json {args.json}: folder {folder} does not exist")
    if args.smoke:
        return None
    if not gpus:
        raise ProbeError(
            "no NVIDIA GPU visible (nvidia-smi is missing or lists none): the probe measures "
            "GPU behaviour and has nothing to measure here; run it on a GPU host, or add "
            "--smoke for a tiny CPU run that checks the script itself"
        )
    chosen = next((g for g in gpus if g["index"] == args.gpu), None)
    if chosen is None:
        seen = ", ".join(str(g["index"]) for g in gpus)
        raise ProbeError(f"--gpu {args.gpu}: nvidia-smi lists GPU(s) {seen}")
    return chosen


def run_child(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """One part's process; its exit code (None: killed at ``timeout``) and stderr's tail."""
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return None, (err or "")[-TAIL:]
    return done.returncode, done.stderr[-TAIL:]


def _environment(gpu: dict[str, Any] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = str(gpu["index"]) if gpu is not None else ""
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _part(
    part: Part, smoke: bool, env: dict[str, str], left: float, folder: Path, runner: Runner
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": part.name, "settles": part.settles}
    if left < MIN_PART_S:
        return {**entry, "status": "skipped", "reason": f"{left:.0f} s of the budget left"}
    out = folder / f"{part.name}.json"
    args = [*(part.smoke_args if smoke else part.gpu_args), "--json", str(out)]
    argv = [sys.executable, "-m", part.module, *args]
    timeout = min(part.seconds * (1.5 if smoke else 1.2), left)
    started = time.monotonic()
    code, tail = runner(argv, env, timeout)
    entry.update(argv=argv[1:], exit_code=code, seconds=round(time.monotonic() - started, 1))
    document = None
    if out.is_file():
        try:
            document = json.loads(out.read_text(encoding="utf-8"))
        except ValueError as exc:
            tail = f"{tail}\nunreadable document: {exc}"
    if code is None:
        status = "timeout"
    elif document is None:
        status = "crashed"
    else:
        status = "ran"  # the workload's own verdict is in the document: a FAIL is data here
    entry.update(status=status, document=document, stderr_tail=None if document else tail)
    return entry


def run_probe(
    args: argparse.Namespace, gpus: list[dict[str, Any]], runner: Runner = run_child
) -> dict[str, Any]:
    """Every part in turn within the budget; the document the probe writes."""
    gpu = check_arguments(args, gpus)
    started, started_at = time.monotonic(), datetime.now(timezone.utc).isoformat()
    env = _environment(gpu)
    parts = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-probe-") as tmp:
        for part in PARTS:
            if args.only and part.name not in args.only:
                continue
            left = args.budget_s - (time.monotonic() - started)
            parts.append(_part(part, args.smoke, env, left, Path(tmp), runner))
    return {
        "probe_version": PROBE_VERSION,
        "mode": "smoke" if args.smoke else "gpu",
        "host": socket.gethostname(),
        "started_at": started_at,
        "duration_s": round(time.monotonic() - started, 1),
        "budget_s": args.budget_s,
        "gpu": gpu,
        "parts": parts,
    }


def main(
    argv: list[str] | None = None,
    runner: Runner = run_child,
    gpus: Callable[[], list[dict[str, Any]]] = list_gpus,
) -> int:
    args = parser().parse_args(argv)
    try:
        document = run_probe(args, [] if args.smoke else gpus(), runner)
    except ProbeError as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return REFUSAL
    Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    ran = sum(p["status"] == "ran" for p in document["parts"])
    print(f"probe: {ran}/{len(document['parts'])} part(s) ran; wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
