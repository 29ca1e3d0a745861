"""The verdict a vendor-diagnostic gate returns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# pass and fail as usual; error: the output could not be trusted; skip: the check does not
# apply (no GPU, MIG) or nothing ran; warn: below an advisory floor; no_floor: a figure was
# measured but gpufleet knows no floor to judge it by (reported, never a pass).
STATUSES = ("pass", "fail", "error", "skip", "warn", "no_floor")


@dataclass(frozen=True)
class Verdict:
    """A gate's answer: ``status`` (one of ``STATUSES``), a ``reason`` that names the GPU
    and the error where there is one, the figures it judged and the floor's source."""

    check: str
    status: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
