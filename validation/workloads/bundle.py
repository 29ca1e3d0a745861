"""Several workloads in one TensorFlow process, one results document each: the quick tier's run.

Run: ``python -m validation.workloads.bundle --json-dir DIR [--quick] [--workloads a,b,c]``
(or ``--warm-cache`` without ``--json-dir``: the same steps compiled, no documents; see
validation.workloads.warm)

TensorFlow's import and a CUDA context on every GPU cost ~20 s on an 8-GPU host (an assumption,
docs/explanation/time-budget.md): paid once here instead of once per workload. Each workload's
document is the one its own module writes (``DIR/<workload>.json``, written as soon as that
workload ends, so a later crash keeps it), so the suite, the periodic runner and the reports
read them unchanged. All GPUs stay visible; a single-GPU workload runs on the first
(validation.host.gpu_selection pins it to GPU 0 in the quick tier anyway). Exit status: 0 when every
document was written, 1 when a workload crashed (its document says how), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from validation.host.gpu_selection import SINGLE_GPU_WORKLOADS
from validation.verdicts.tiers import QUICK_WORKLOADS
from validation.workloads import _common
from validation.workloads._devices import discover_devices
from validation.workloads._floors import read_calibration
from validation.workloads._run import Run
from validation.workloads.gemm import _arguments as gemm_arguments

# What may share one process: one MirroredStrategy at most (a second aborts collectives;
# DESIGN.md), and none that needs a process of its own (memory_growth sets the allocator
# before TensorFlow starts, allreduce builds its own strategy).
BUNDLEABLE = QUICK_WORKLOADS
# Logical CPU devices without a GPU: the most any bundled workload asks for (mirrored, gemm).
LOGICAL_CPUS = 2


def _parser() -> argparse.ArgumentParser:
    parser = _common._parser("bundle", __doc__.splitlines()[0])
    parser.add_argument(
        "--json-dir", type=Path, metavar="DIR", help="required but with --warm-cache"
    )
    parser.add_argument(
        "--workloads",
        default=",".join(QUICK_WORKLOADS),
        help=f"comma-separated, in order, from {', '.join(BUNDLEABLE)}",
    )
    gemm_arguments(parser)
    return parser


def workload_names(text: str) -> list[str]:
    """The workloads named, refusing any that cannot share a process (ValueError)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in BUNDLEABLE]
    if wrong or not names or len(set(names)) != len(names):
        raise ValueError(f"--workloads {text!r}: name each of {', '.join(BUNDLEABLE)} at most once")
    return names


def adopt_devices(run: Run, first: Run, workload: str) -> None:
    """``first``'s devices for ``run`` (TensorFlow configures devices once per process); a
    single-GPU workload gets the first GPU (or CPU device) only."""
    single = workload in SINGLE_GPU_WORKLOADS
    run.gpus = first.gpus[:1] if single else list(first.gpus)
    run.cpus = first.cpus[:1] if single else list(first.cpus)
    names = set(run.gpus or run.cpus)
    run.devices = [dict(d) for d in first.devices if d["name"] in names]
    run.compute_capability, run.gpu_model = first.compute_capability, first.gpu_model


def body_of(workload: str) -> Callable[[Run], None]:
    body: Callable[[Run], None] = importlib.import_module(f"validation.workloads.{workload}").body
    return body


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        names = workload_names(args.workloads)
    except ValueError as exc:
        parser.error(str(exc))
    if args.json_dir is None and not args.warm_cache:
        parser.error("--json-dir DIR is required (but with --warm-cache, which writes none)")
    if args.json_dir is not None and not args.warm_cache:
        args.json_dir.mkdir(parents=True, exist_ok=True)
    _common._setup_logging()
    status = 0
    # The process's TensorFlow, busy state and devices, found once by the first workload.
    host: Run | None = None
    for name in names:
        run, started, started_at = _common.new_run(name, args)
        hosts: list[Run] = []

        def setup(
            run: Run = run, name: str = name, known: Run | None = host, hosts: list[Run] = hosts
        ) -> None:
            calibration: dict[str, Any] | None = read_calibration(args.calibration)
            if known is None:
                _common.start_tensorflow(run)
                known = Run(workload="bundle", args=args, tf=run.tf, sampler=run.sampler)
                discover_devices(known, LOGICAL_CPUS)
                run.config["bundle_devices"] = [d["name"] for d in known.devices]
            else:  # TensorFlow is up: the busy state read before it started still stands
                run.tf, run.busy, run.sampler = known.tf, known.busy, _common.NvmlSampler()
                keys = ("xla_cache", "tensorflow_version", "gpu_busy", "bundle_devices")
                run.config.update({k: known.config.get(k) for k in keys})
            known.busy, known.config = run.busy, dict(run.config)
            hosts.append(known)
            adopt_devices(run, known, name)
            _common.load_run_limits(run, calibration)

        verdict, crashed = _common.execute(run, body_of(name), setup)
        if run.warm:  # a warm-up writes no document
            crashed = _common.warm_status(run, crashed)
        else:
            text = _common.document_text(run, started, started_at, verdict)
            (args.json_dir / f"{name}.json").write_text(text + "\n")
            run.step("done", f"verdict {verdict.status}: {verdict.reason}")
        if run.sampler:
            run.sampler.close()
        status = max(status, crashed)
        if host is None:
            if not hosts or not hosts[0].devices:  # TensorFlow did not start: nor can the rest
                return 1
            host = hosts[0]
    return status


if __name__ == "__main__":
    raise SystemExit(main())
