"""What a GPU health check finds, and how it reads a parsed nvidia-smi report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One thing wrong (severity "fail") or worth knowing ("info") about one GPU or the host.

    Example: ``Finding("ecc", "fail", "GPU 0 ...: 2 uncorrectable volatile ECC errors", gpu="0")``
    """

    check: str
    severity: str
    message: str
    gpu: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_of(obj: Any, name: str) -> Any:
    """A field of a parser result, whether it is a dataclass or a dict."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def gpus_of(smi: Any) -> list[Any]:
    """The per-GPU entries of a parsed ``nvidia-smi -q -x`` report."""
    return list(field_of(smi, "gpus") or [])


def label(index: int, gpu: Any) -> str:
    bus_id = field_of(gpu, "pci_bus_id")
    name = field_of(gpu, "name")
    return f"GPU {index} ({name or 'unknown'}, {bus_id or 'no bus id'})"
