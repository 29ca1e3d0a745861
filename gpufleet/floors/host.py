"""`gpufleet thresholds INVENTORY --limit HOST`: the floors one host is held to, with sources."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from gpufleet.floors import calibration
from gpufleet.floors.floor_types import FloorError


@dataclass
class HostKind:
    """The kind of host its floors are keyed off, and where each part of it came from."""

    host: str
    gpu_model: str
    gpu_count: int
    interconnect: str
    calibration: str | None
    thresholds: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def _one_host(args: argparse.Namespace) -> Any:
    from gpufleet.inventory import InventoryError, load_hosts

    try:
        hosts = load_hosts(args.inventory, args.limit)
    except InventoryError as exc:
        raise FloorError(str(exc)) from None
    if len(hosts) != 1:
        names = ", ".join(h.name for h in hosts)
        raise FloorError(
            f"--limit {' '.join(args.limit) or '(none)'} gives {len(hosts)} hosts ({names}); "
            "the floors are per host: name exactly one with --limit HOST"
        )
    return hosts[0]


def host_kind(args: argparse.Namespace) -> HostKind:
    """The host's kind from the flags, else its inventory data and its calibration file."""
    from gpufleet.datacheck import host_problems
    from gpufleet.spec import NodeSpec
    from validation.verdicts.expectations import spec_data

    host = _one_host(args)
    problems = host_problems(host, args.inventory)
    if problems:
        raise FloorError(
            f"host {host.name}: " + "; ".join(f"{m} (set in {w})" for m, w in problems)
        )
    spec = NodeSpec.from_host_data(spec_data(host.data))
    path = args.calibration or spec.calibration_file
    cal = calibration.load(path) if path else None
    where_cal = f"calibration file {path}"
    sources = {}

    def pick(name: str, flag: Any, *found: tuple[Any, str]) -> Any:
        if flag is not None:
            sources[name] = f"--{name.replace('_', '-')}"
            return flag
        for value, where in found:
            if value is not None:
                sources[name] = where
                return value
        return None

    if spec.gpu_less:
        model, count, link = calibration.CPU_MODEL, 0, "none"
        sources = dict.fromkeys(("gpu_model", "gpu_count", "interconnect"), "gpu_less: true")
    else:
        model = pick("gpu_model", args.gpu_model, (cal and cal.gpu_model, where_cal))
        count = pick(
            "gpu_count",
            args.gpu_count,
            (spec.gpu_count, "the inventory's gpu_count"),
            (cal and cal.gpu_count, where_cal),
        )
        link = pick(
            "interconnect",
            args.interconnect,
            (cal and cal.interconnect, where_cal),
            ("single_gpu" if count == 1 else None, "one GPU"),
        )
    missing = [
        n
        for n, v in (("gpu-model", model), ("gpu-count", count), ("interconnect", link))
        if v is None
    ]
    if missing:
        raise FloorError(
            f"host {host.name}: its inventory data does not say its {', '.join(missing)}. Fix: "
            f"give --{' --'.join(missing)} (nvidia-smi --query-gpu=name and nvidia-smi topo -m on "
            "the host say them), or set calibration_file for it"
        )
    if model != calibration.CPU_MODEL:
        from gpufleet.floors.derived import find_model

        model = find_model(str(model)).name  # as nvidia-smi prints it
    return HostKind(host.name, str(model), int(count), str(link), path, spec.thresholds, sources)


def validation_thresholds(kind: HostKind) -> list[tuple[str, float, str]]:
    """The suite's thresholds (validation/verdicts/thresholds.toml and the inventory's
    ``thresholds``) for the host's kind: name, value, and the layer it came from."""
    from gpufleet.matrix.gpu_lookup import lookup
    from validation.verdicts.thresholds import (
        TOPOLOGY_CLASSES,
        ThresholdsError,
        load_thresholds_with_sources,
    )

    found = lookup(kind.gpu_model) if kind.gpu_model != calibration.CPU_MODEL else []
    cc = found[0].compute_capability if len(found) == 1 else None
    link = "nvlink" if kind.interconnect == "nvswitch" else kind.interconnect
    try:
        values, sources = load_thresholds_with_sources(
            cc,
            found[0].name if len(found) == 1 else None,
            kind.thresholds,
            topology=link if link in TOPOLOGY_CLASSES else None,
            gpu_count=kind.gpu_count or None,
        )
    except ThresholdsError as exc:
        raise FloorError(f"host {kind.host}: thresholds: {exc}") from None
    return [(key, values[key], sources[key]) for key in sorted(values)]


def describe(kind: HostKind) -> list[str]:
    """The heading lines: the host, its kind and where each part of it came from."""
    parts = ", ".join(f"{k} from {v}" for k, v in kind.sources.items())
    cal = f"; calibration {kind.calibration}" if kind.calibration else "; no calibration file"
    return [
        f"{kind.host}: {kind.gpu_model} x{kind.gpu_count} ({kind.interconnect}){cal}",
        f"    ({parts})",
    ]
