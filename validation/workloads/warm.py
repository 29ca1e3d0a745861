"""Compile-only warm-up of XLA's persistent cache: every XLA step both tiers run, as they run it.

Run: ``python -m validation.workloads.warm [--tiers quick,full] [--workloads a,b] [--cache-dir DIR]
[--marker-text TEXT]``

Each process in which a tier runs an XLA-compiled workload (validation.verdicts.tiers.XLA_COMPILED)
runs again with ``--warm-cache``, with that tier's options and devices: the quick tier's one process
(validation.workloads.bundle, every GPU visible), the full tier's single-GPU workloads pinned to
GPU 0 as validation.host.gpu_selection pins them (the full tier's resnet50 on GPU N is a process
that sees one GPU too: the same keys), mirrored with every GPU. Each step is built and traced in the
tier's order and called once (validation.workloads.xla_cache explains why that gives the tier's
keys); nothing is timed and no results document is written. One process at a time.

Prints one JSON document marked ``"warm_up": true``: the entries of this GPU set's folder
``DIR/<gpu set>`` (validation.workloads.xla_cache.gpu_set_key, where the processes write) before and
after, and each process with its exit status and seconds. With ``--marker-text``, writes that
text to ``DIR/gpufleet-warm-up`` once every process succeeded: the deploy's record that this
TensorFlow, payload and GPU set are warm. Exit status: 0 warmed, 1 a process failed (the
marker is not written), 2 bad arguments or no cache directory, 3 not started: a GPU is busy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validation.host.gpu_selection import gpus_under_test, visible_env
from validation.verdicts.tiers import BUNDLED, TIMEOUT_S, XLA_COMPILED
from validation.workloads import xla_cache

# What TF_XLA_FLAGS can carry: TensorFlow splits the variable at spaces (env.sh's rule too).
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")
BUSY = 3


@dataclass(frozen=True)
class WarmProcess:
    """One process of a tier, re-run as a warm-up: its workloads, and the GPU it is pinned to."""

    tier: str
    workloads: tuple[str, ...]
    gpu: str | None = None  # the CUDA ordinal (validation.host.gpu_selection); None: as it is
    bundle: bool = False

    def argv(self, python: str) -> list[str]:
        """The workload's (or the bundle's) command line, as its tier's plus ``--warm-cache``."""
        if self.bundle:
            command = [python, "-m", "validation.workloads.bundle"]
            command += ["--workloads", ",".join(self.workloads)]
        else:
            command = [python, "-m", f"validation.workloads.{self.workloads[0]}"]
        return [*command, *(["--quick"] if self.tier == "quick" else []), "--warm-cache"]

    def environment(self, base: Mapping[str, str], cache_dir: Path) -> dict[str, str]:
        """``base`` with the tier's settings (validation.test_workloads' commands) and the cache."""
        env = {**base, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        env.update(visible_env(self.gpu))
        env["TF_XLA_FLAGS"] = flags_with_cache(base.get("TF_XLA_FLAGS", ""), cache_dir)
        return env

    @property
    def timeout_s(self) -> int:
        return TIMEOUT_S[self.tier] * len(self.workloads)


def flags_with_cache(flags: str, cache_dir: Path) -> str:
    """TF_XLA_FLAGS naming ``cache_dir`` as the persistent cache, the caller's other flags kept."""
    kept = [w for w in shlex.split(flags) if not w.startswith(xla_cache.FLAG)]
    return " ".join([f"{xla_cache.FLAG}{cache_dir}", *kept])


def warm_processes(
    tiers: Sequence[str], gpu_count: int, only: Sequence[str] | None = None
) -> list[WarmProcess]:
    """The processes to re-run: per tier, those holding an XLA-compiled workload (``only``:
    of these workloads). A bundle runs its workloads up to the last compiled one, in its order.

    Example:
        >>> [(p.tier, p.workloads, p.gpu) for p in warm_processes(["quick"], 8)]
        [('quick', ('resnet50',), None)]
        >>> warm_processes(["full"], 8, only=["xla"])[0].gpu
        '0'
    """
    processes = []
    for tier in tiers:
        compiled = [w for w in XLA_COMPILED[tier] if only is None or w in only]
        bundled = BUNDLED.get(tier, ())
        inside = [i for i, name in enumerate(bundled) if name in compiled]
        if inside:
            processes.append(WarmProcess(tier, tuple(bundled[: inside[-1] + 1]), bundle=True))
        for name in compiled:
            if name not in bundled:
                gpu = gpus_under_test(name, tier, gpu_count)[0]  # the tier's first process
                processes.append(WarmProcess(tier, (name,), gpu))
    return processes


def write_marker(cache_dir: Path, text: str) -> Path:
    """``text`` in ``cache_dir``'s marker (xla_cache.MARKER), replaced in one rename."""
    path = cache_dir / xla_cache.MARKER
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(text + "\n")
    os.chmod(staged, 0o644)
    os.replace(staged, path)
    return path


def _busy() -> str | None:
    from validation.host.nvml_sampler import NvmlSampler

    sampler = NvmlSampler()
    try:
        return sampler.busy_reason()
    finally:
        sampler.close()


def _gpu_count() -> int:
    from validation.periodic.checks import nvidia_gpus_on_bus

    return nvidia_gpus_on_bus()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m validation.workloads.warm", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--tiers", default="quick,full", help="comma-separated: quick, full")
    parser.add_argument("--workloads", default=None, help="only these (comma-separated)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="the cache to warm (default: the one TF_XLA_FLAGS names)",
    )
    parser.add_argument("--marker-text", default=None, help="written to DIR/gpufleet-warm-up")
    return parser


def run(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Every warm-up process, one after another; fills ``report``; the exit status."""
    cache_dir: Path = args.cache_dir
    processes = warm_processes(
        [t for t in args.tiers.split(",") if t],
        _gpu_count(),
        [w for w in args.workloads.split(",") if w] if args.workloads else None,
    )
    busy = _busy()
    if busy:
        report["status"] = f"not started: {busy}"
        return BUSY
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Each process's prepare() keys the cache by the same /proc files: its folder is this one.
    key, note = xla_cache.gpu_set()
    report["gpu_set"] = key
    if note:
        report["gpu_set_note"] = note
    keyed = cache_dir / key
    report["entries_before"] = len(xla_cache.entries(keyed))
    failed = 0
    for process in processes:
        started = time.monotonic()
        try:
            rc = subprocess.run(
                process.argv(sys.executable),
                env=process.environment(os.environ, cache_dir),
                stdout=subprocess.DEVNULL,
                timeout=process.timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        report["processes"].append(
            {
                "tier": process.tier,
                "workloads": list(process.workloads),
                "gpu": process.gpu,
                "exit_status": rc,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        failed += rc != 0
    report["entries_after"] = len(xla_cache.entries(keyed))
    if failed:
        report["status"] = f"{failed} of {len(processes)} processes failed: marker not written"
        return 1
    # Other GPU sets' folders go: this runs after the deploy's reboot with every GPU answering,
    # so this key is the host's GPUs and driver, and no process here loads another set's
    # entries again (a set the host gets back is warmed again, minutes once). Not when a /proc
    # file was unreadable (the key is then a fallback: the real set's folder may be another) or
    # no driver is loaded (a manual run on the CPU: the GPUs' folders serve the driver's
    # return). Entries in DIR itself (before the cache was keyed, or another program's) are
    # left to prune(), oldest first.
    if note is None and key != xla_cache.NO_GPUS:
        report["removed_gpu_sets"] = xla_cache.drop_other_sets(cache_dir, key)
    if args.marker_text is not None:
        report["marker"] = str(write_marker(cache_dir, args.marker_text))
    report["status"] = "warmed"
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    tiers = [t for t in args.tiers.split(",") if t]
    if not tiers or any(t not in XLA_COMPILED for t in tiers):
        parser.error(f"--tiers {args.tiers!r}: name {', '.join(XLA_COMPILED)}")
    if args.cache_dir is None:
        args.cache_dir = xla_cache.cache_directory()
    if args.cache_dir is None:
        parser.error("no cache to warm: give --cache-dir, or set TF_XLA_FLAGS (env.sh does)")
    args.cache_dir = xla_cache.base_directory(args.cache_dir)  # a GPU set's folder: its base
    if not _PLAIN_PATH.match(str(args.cache_dir)):
        parser.error(f"--cache-dir {str(args.cache_dir)!r}: an absolute path of A-Za-z0-9._/-")
    report: dict[str, Any] = {
        "warm_up": True,
        "cache_directory": str(args.cache_dir),
        "tiers": tiers,
        "processes": [],
    }
    status = run(args, report)
    print(json.dumps(report, indent=2))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
