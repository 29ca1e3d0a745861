"""`gpufleet thresholds`: print the floors a kind of host faces, or judge a figures file."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from gpufleet.floors import calibration
from gpufleet.floors.checks import Verdict, figures_from, judge
from gpufleet.floors.derived import Floor, FloorError, find_model, floors_for
from gpufleet.floors.host import HostKind
from gpufleet.floors.names import apply_overrides, set_by
from gpufleet.floors.nccl import GIB, find_floor

NCCL_FIGURE = "vendor_diagnostics.nccl_allreduce.busbw_gbps"


def host_floors(args: argparse.Namespace) -> list[Floor]:
    """The floors for the arguments' host kind, with the calibration file applied if given."""
    if args.gpu_model == calibration.CPU_MODEL:
        # A GPU-less host has no published floors: its only floors are a CPU calibration's.
        if not args.calibration:
            raise FloorError(
                "a GPU-less host (--gpu-model cpu --gpu-count 0 --interconnect none) has floors "
                "only from a calibration file: add --calibration FILE"
            )
        floors = []
    else:
        floors = floors_for(args.gpu_model, args.gpu_count, args.interconnect)
    if args.calibration:
        cal = calibration.load(args.calibration)
        floors = calibration.apply(floors, cal, args.gpu_model, args.gpu_count, args.interconnect)
    return floors


def _print_floors(floors: list[Floor]) -> None:
    for f in floors:
        sign = ">=" if f.bound == "min" else "<="
        value = f"{sign} {f.value:g}" if f.value is not None else "(none)"
        scope = " per GPU" if f.per_gpu else ""
        print(f"{f.name:42} {value:>10} {f.unit}{scope}")
        print(f"    {f.origin}")
        print(f"    figure: {f.figure or '(none: gpufleet choice or calibration)'}")
        print(f"    configuration: {f.config or '(not a measured figure)'}")
        print(f"    source: {f.source or _source_of(f)}")


def nccl_floors(gpu_model: str, gpu_count: int, interconnect: str) -> list[Floor]:
    """The nccl-tests all-reduce floor this kind faces (gpufleet/floors/nccl.py, judged by
    vendor_diagnostics::nccl_allreduce) as a Floor with its figure, configuration and source;
    empty where there is none. An 8-GPU ``nvswitch`` board is nccl.py's ``nvlink``."""
    link = "nvlink" if interconnect == "nvswitch" else interconnect
    found = find_floor(gpu_model, gpu_count, link)
    if found is None:
        return []
    at = found.measured_at
    size = f"{at / GIB:g} GiB" if at >= GIB else f"{at / (1 << 20):g} MiB"
    which = "at the largest message size" if found.metric == "largest" else "best of any size"
    origin = "published" if found.enforced else "published, advisory (a figure below it warns)"
    note = f"; {found.note}" if found.note else ""
    floor = Floor(NCCL_FIGURE, round(found.busbw_gbps, 3), "GB/s", origin + note)
    return [
        floor.sourced(
            figure=f"all_reduce_perf bus bandwidth {which}",
            config=f"nccl-tests all_reduce_perf, {gpu_count} GPUs ({link}), sizes up to {size}",
            source=found.source,
        )
    ]


def _print_nccl(gpu_model: str, gpu_count: int, interconnect: str) -> None:
    print("nccl-tests floor (gpufleet/floors/nccl.py, vendor_diagnostics::nccl_allreduce):")
    found = nccl_floors(gpu_model, gpu_count, interconnect)
    if not found:
        print("    (none for this kind of host: the bus bandwidth is reported, not judged)")
    _print_floors(found)


def _source_of(floor: Floor) -> str:
    """Where a floor without a published figure comes from: calibration, a choice, or nothing."""
    if floor.origin.startswith("calibration"):
        return floor.origin
    if floor.value is None:
        return "none yet: reported until calibration sets it"
    return "gpufleet's choice (see the origin above)"


def _gpus_seen(doc: object) -> tuple[int, set[str]] | None:
    """The GPUs a results (or one workload) document's workloads saw, as (count, models);
    None for a bare {name: value} file, which does not say."""
    if not isinstance(doc, dict):
        return None
    workloads = doc["workloads"] if isinstance(doc.get("workloads"), list) else [doc]
    seen = [
        w["devices"]
        for w in workloads
        if isinstance(w, dict) and isinstance(w.get("devices"), list)
    ]
    gpus = [[d for d in devs if isinstance(d, dict) and d.get("type") == "GPU"] for devs in seen]
    if not gpus:
        return None
    return max(map(len, gpus)), {str(d["model"]) for g in gpus for d in g if d.get("model")}


def kind_warning(path: str, doc: object, gpu_model: str, gpu_count: int) -> str:
    """Why the document's run is not of the kind asked (another GPU, none, another count), or
    "": its verdicts would be against floors that are not its own."""
    seen = _gpus_seen(doc)
    if seen is None:
        return ""
    count, models = seen
    cpu = gpu_model == calibration.CPU_MODEL
    asked = "no GPU" if cpu else f"{gpu_count}x {find_model(gpu_model).name}"
    if count == 0 and not cpu:
        ran = "no GPU (its workloads saw only CPU devices)"
        fix = "for a GPU-less run give --gpu-model cpu --gpu-count 0 --interconnect none "
        fix += "--calibration FILE"
    elif count and cpu:
        ran, fix = f"{count} GPU(s)", "give --gpu-model, --gpu-count and --interconnect"
    else:
        names = {_model_name(m) for m in models}
        if count == gpu_count and (cpu or not names or names == {find_model(gpu_model).name}):
            return ""
        ran = f"{count}x {', '.join(sorted(names)) or 'GPU'}"
        fix = "give the --gpu-model and --gpu-count it ran on"
    return (
        f"warning: {path} ran on {ran}, but is judged against the floors of {asked}: the "
        f"verdicts below are not its own. Fix: {fix}."
    )


def _model_name(model: str) -> str:
    try:
        return find_model(model).name
    except FloorError:  # a GPU gpufleet's table lacks: its own name
        return model


def _load_figures(path: str, gpu_model: str, gpu_count: int) -> dict[str, object]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FloorError(f"cannot read figures file {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FloorError(f"{path} is not valid JSON: {exc}") from None
    figures = figures_from(doc)
    warning = kind_warning(path, doc, gpu_model, gpu_count)
    if warning:
        print(warning, file=sys.stderr)
    return figures


def _print_verdicts(verdicts: list[Verdict]) -> None:
    mark = {True: "pass", False: "FAIL", None: "----"}
    for v in verdicts:
        print(f"{mark[v.passed]}  {v.name:46} {v.detail}")


def _print_host(kind: HostKind, floors: list[Floor], as_json: bool) -> int:
    from gpufleet.floors.host import describe, validation_thresholds

    suite = validation_thresholds(kind)
    if as_json:
        document = {
            "host": kind.host,
            "kind": {k: getattr(kind, k) for k in ("gpu_model", "gpu_count", "interconnect")},
            "sources": kind.sources,
            "calibration_file": kind.calibration,
            "floors": [dataclasses.asdict(f) for f in floors],
            "nccl_tests_floors": [
                dataclasses.asdict(f)
                for f in nccl_floors(kind.gpu_model, kind.gpu_count, kind.interconnect)
            ],
            "thresholds": [{"name": n, "value": v, "source": s} for n, v, s in suite],
        }
        print(json.dumps(document, indent=2))
        return 0
    print("\n".join(describe(kind)))
    print("floors (gpufleet/floors/derived.py, the calibration file applied):")
    _print_floors(floors)
    _print_nccl(kind.gpu_model, kind.gpu_count, kind.interconnect)
    print(
        "validation thresholds (validation/verdicts/thresholds.toml, "
        "then the inventory's thresholds):"
    )
    for name, value, source in suite:
        sets = set_by(name)
        floor = f" (an inventory value sets the floor of {', '.join(sets)})" if sets else ""
        print(f"{name:42} {value:>10g}  {source}{floor}")
    return 0


def run(args: argparse.Namespace) -> int:
    """0: printed (or every judged figure passed); 1: some figure failed; 2: bad input."""
    kind = None
    try:
        if getattr(args, "inventory", None):  # one host's kind, from its inventory data
            from gpufleet.floors.host import host_kind

            kind = host_kind(args)
            args.gpu_model, args.gpu_count = kind.gpu_model, kind.gpu_count
            args.interconnect, args.calibration = kind.interconnect, kind.calibration
        floors = host_floors(args)
        if kind is not None:  # the inventory's thresholds that set a floor (xla_speedup_min)
            floors = apply_overrides(floors, kind.thresholds)
        verdicts = None
        if args.judge:
            verdicts = judge(floors, _load_figures(args.judge, args.gpu_model, args.gpu_count))
        if verdicts is None and kind is not None:
            return _print_host(kind, floors, args.json)
    except FloorError as exc:
        print(f"gpufleet thresholds: {exc}", file=sys.stderr)
        return 2
    if verdicts is None:
        if args.json:
            print(json.dumps([dataclasses.asdict(f) for f in floors], indent=2))
        else:
            _print_floors(floors)
            _print_nccl(args.gpu_model, args.gpu_count, args.interconnect)
        return 0
    if args.json:
        print(json.dumps([dataclasses.asdict(v) for v in verdicts], indent=2))
    else:
        _print_verdicts(verdicts)
    failed = [v.name for v in verdicts if v.passed is False]
    judged = [v for v in verdicts if v.passed is not None]
    if not judged:
        print("gpufleet thresholds: no figure in the file has a floor", file=sys.stderr)
        return 2
    if failed:
        print(f"{len(failed)} of {len(judged)} judged figure(s) below their floor", file=sys.stderr)
        return 1
    return 0
