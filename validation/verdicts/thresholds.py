"""Validation thresholds: defaults by compute capability, GPU topology and model, plus overrides.

Example:
    >>> values = load_thresholds((8, 0), "NVIDIA A100-SXM4-80GB", {"xla_speedup_min": 1.2})
    >>> values["xla_speedup_min"], values["allreduce_busbw_min_gbps"]
    (1.2, 205.0)
    >>> load_thresholds("8.9", "NVIDIA L40S", topology="cross_socket", gpu_count=4)[
    ...     "allreduce_busbw_min_gbps"]
    3.0

The values and where each comes from live in thresholds.toml beside this file.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpufleet.floors.names import SETTABLE, threshold_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 hosts
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None  # type: ignore[assignment]  # tomli is installed where mypy runs

DEFAULT_PATH = Path(__file__).with_name("thresholds.toml")

# The GPU interconnect classes that validation/workloads/_topology.py derives from
# `nvidia-smi topo -m`; [allreduce_topology.<class>] sections may name only these.
TOPOLOGY_CLASSES = (
    "nvlink",  # every GPU pair joined by NVLink (NVSwitch baseboards, NVLink-bridged pairs)
    "nvlink_partial",  # some pairs NVLink, the others PCIe (DGX-1 cube mesh, bridged pairs)
    "pcie_switch",  # slowest pair PIX/PXB: PCIe switches, not through the CPU
    "pcie_host_bridge",  # slowest pair PHB/NODE: through the CPU's host bridge(s), one socket
    "cross_socket",  # slowest pair SYS: across the inter-socket link (QPI/UPI/Infinity Fabric)
    "single_gpu",
    "no_gpu",
    "unknown",  # nvidia-smi or the parser unavailable, or a link word gpufleet does not know
)
TOPOLOGY_KEY = "allreduce_busbw_min_gbps"  # the one threshold a topology class sets
_TOPOLOGY_FIELDS = {TOPOLOGY_KEY, "by_gpu_count"}


class ThresholdsError(ValueError):
    """A thresholds file or override that cannot be used; the message says how to fix it."""


def parse_compute_capability(value: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """(8, 0) from "8.0", (8, 0) or None.

    Example:
        >>> parse_compute_capability("8.6")
        (8, 6)
    """
    if value is None:
        return None
    if isinstance(value, tuple):
        parts: list[Any] = list(value)
    else:
        parts = str(value).split(".")
    try:
        major, minor = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ThresholdsError(
            f"compute capability {value!r} is not MAJOR.MINOR (for example '8.0' or (8, 0))"
        ) from None
    return (major, minor)


def _check_topology_tables(path: Path, tables: Mapping[str, Any]) -> None:
    for name, values in tables.items():
        where = f"{path}: [allreduce_topology.{name}]"
        if name not in TOPOLOGY_CLASSES:
            close = difflib.get_close_matches(name, TOPOLOGY_CLASSES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ThresholdsError(
                f"{where} is not a topology class{hint} Known: {', '.join(TOPOLOGY_CLASSES)}"
            )
        unknown = set(values) - _TOPOLOGY_FIELDS
        if unknown:
            raise ThresholdsError(
                f"{where} sets {sorted(unknown)}; a topology class sets only {TOPOLOGY_KEY} "
                "and by_gpu_count = { GPUS = GB/s, ... }"
            )
        floors = dict(values.get("by_gpu_count", {}))
        for count in floors:
            if not count.isdigit() or int(count) < 2:
                raise ThresholdsError(
                    f"{where} by_gpu_count key {count!r} is not a GPU count >= 2 "
                    "(write by_gpu_count = { 8 = 205.0 })"
                )
        if TOPOLOGY_KEY in values:
            floors[TOPOLOGY_KEY] = values[TOPOLOGY_KEY]
        for key, floor in floors.items():
            if isinstance(floor, bool) or not isinstance(floor, (int, float)) or floor < 0:
                raise ThresholdsError(f"{where} {key} = {floor!r} must be a number of GB/s >= 0")


def read_table(path: Path = DEFAULT_PATH) -> dict[str, Any]:
    """The TOML document, checked: [defaults], [compute_capability.*], [allreduce_topology.*]
    and [gpu_model.*] only."""
    if tomllib is None:
        raise ThresholdsError(
            "reading thresholds.toml needs Python >= 3.11 or the 'tomli' package: install tomli "
            "into this Python environment (pip install tomli)"
        )
    try:
        document = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ThresholdsError(f"cannot read thresholds file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThresholdsError(f"thresholds file {path} is not valid TOML: {exc}") from None
    extra = set(document) - {"defaults", "compute_capability", "allreduce_topology", "gpu_model"}
    if extra or "defaults" not in document:
        raise ThresholdsError(
            f'{path}: expected tables [defaults], [compute_capability."X.Y"], '
            f'[allreduce_topology.CLASS] and [gpu_model."NAME"]; found {sorted(document)}'
        )
    known = set(document["defaults"])
    for section in ("compute_capability", "gpu_model"):
        for name, values in document.get(section, {}).items():
            unknown = set(values) - known
            if unknown:
                raise ThresholdsError(
                    f'{path}: [{section}."{name}"] sets {sorted(unknown)}, which [defaults] '
                    "does not define; every key needs a default"
                )
    _check_topology_tables(path, document.get("allreduce_topology", {}))
    return document


def _check_overrides(overrides: Mapping[str, Any], known: Mapping[str, Any]) -> dict[str, float]:
    """The overrides checked; a figure's dotted name (gpufleet.floors.names SETTABLE) is known
    too, and also sets the thresholds.toml key it stands for (``allreduce.busbw_gbps``)."""
    checked: dict[str, float] = {}
    names = [*known, *sorted(SETTABLE)]
    unknown = [key for key in overrides if key not in known and key not in SETTABLE]
    if unknown:  # every one, in one message
        named = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), names, n=1)
            named.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        word = "threshold" if len(unknown) == 1 else "thresholds"
        raise ThresholdsError(
            f"unknown {word} {', '.join(named)} in the inventory's 'thresholds'. "
            f"Known thresholds: {', '.join(sorted(known))}; or a judged figure's dotted name "
            "(docs/reference/metrics.md#figure-names), e.g. 'xla.speedup.amp'"
        )
    for key, value in overrides.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ThresholdsError(
                f"threshold {key!r} must be a number; got {value!r} ({type(value).__name__})"
            )
        if value < 0:
            raise ThresholdsError(f"threshold {key!r} must be >= 0 (0 = not asserted); got {value}")
        checked[key] = float(value)
    for name in [key for key in checked if key in SETTABLE]:
        own = threshold_key(name)
        if own is None:
            continue  # a floor set by its name only (xla.speedup.amp): gpufleet.floors.names
        if own in checked and checked[own] != checked[name]:
            raise ThresholdsError(
                f"thresholds {name!r} = {checked[name]:g} and {own!r} = {checked[own]:g} set "
                f"one floor: give only {name!r} ({own!r} is its older name)"
            )
        checked[own] = checked[name]
    return checked


def _topology_floor(
    document: Mapping[str, Any], topology: str, gpu_count: int | None
) -> tuple[float, str] | None:
    """The class's all-reduce floor for ``gpu_count`` GPUs and its source, or None."""
    if topology not in TOPOLOGY_CLASSES:
        raise ThresholdsError(
            f"unknown GPU topology class {topology!r}; known: {', '.join(TOPOLOGY_CLASSES)}"
        )
    table = document.get("allreduce_topology", {}).get(topology)
    if table is None:
        return None
    by_count = table.get("by_gpu_count", {})
    if gpu_count is not None and str(gpu_count) in by_count:
        return float(by_count[str(gpu_count)]), f"allreduce_topology {topology}, {gpu_count} GPUs"
    if TOPOLOGY_KEY in table:
        return float(table[TOPOLOGY_KEY]), f"allreduce_topology {topology}"
    return None


def load_thresholds_with_sources(
    compute_capability: str | tuple[int, int] | None,
    gpu_model: str | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    topology: str | None = None,
    gpu_count: int | None = None,
    path: Path = DEFAULT_PATH,
) -> tuple[dict[str, float], dict[str, str]]:
    """Thresholds and, per key, the layer it came from ("defaults", "compute_capability 8.0",
    "allreduce_topology nvlink, 8 GPUs", "gpu_model NAME", "inventory override")."""
    document = read_table(path)
    values = {key: float(value) for key, value in document["defaults"].items()}
    sources = dict.fromkeys(values, "defaults")
    capability = parse_compute_capability(compute_capability)
    if capability is not None:
        tiers = sorted(
            (parse_compute_capability(name), name)
            for name in document.get("compute_capability", {})
        )
        for tier, name in tiers:
            if tier is not None and tier <= capability:
                for key, value in document["compute_capability"][name].items():
                    values[key], sources[key] = float(value), f"compute_capability {name}"
    if topology is not None:
        found = _topology_floor(document, topology, gpu_count)
        if found is not None:
            values[TOPOLOGY_KEY], sources[TOPOLOGY_KEY] = found
    if gpu_model:
        models = {name.lower(): name for name in document.get("gpu_model", {})}
        name = models.get(gpu_model.strip().lower())
        if name is not None:
            for key, value in document["gpu_model"][name].items():
                values[key], sources[key] = float(value), f"gpu_model {name}"
    for key, value in _check_overrides(overrides or {}, values).items():
        values[key], sources[key] = value, "inventory override"
    return values, sources


def load_thresholds(
    compute_capability: str | tuple[int, int] | None,
    gpu_model: str | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    topology: str | None = None,
    gpu_count: int | None = None,
    path: Path = DEFAULT_PATH,
) -> dict[str, float]:
    """Thresholds for one GPU: defaults, then compute-capability tiers, the all-reduce floor of
    the GPU topology class (``topology`` from TOPOLOGY_CLASSES, for ``gpu_count`` GPUs), the
    GPU model, and last the inventory's overrides.

    ``compute_capability`` and ``gpu_model`` may be None (no GPU): the defaults apply.
    Unknown override keys raise ThresholdsError with the closest known key.

    Example:
        >>> load_thresholds("7.0", None)["mixed_precision_fp16_speedup_min"]
        2.0
    """
    values, _ = load_thresholds_with_sources(
        compute_capability, gpu_model, overrides, topology=topology, gpu_count=gpu_count, path=path
    )
    return values
