"""Baselines: a host's first passing full validation, and the regressions of later runs against it.

A speed-up, throughput or efficiency that fell by more than a margin (10 % unless told
otherwise) since the baseline is a regression, even when it still clears its absolute
threshold: a host that slowed from 3.1x to 2.2x mixed precision speed-up passes a 1.3x floor
and is still worth a look.

Example::

    path = record_run(Path("results"), document)      # writes results/<host>/baseline.json once
    for regression in compare(load_baseline(path), later_document):
        print(regression.message)

Standard library only (runs on the hosts as well as on the control node).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpufleet.report.figures import Figure, figures_of
from gpufleet.report.schema import ResultsSchemaError, validate_results

BASELINE_NAME = "baseline.json"
HOST_BASELINE_PATH = "/var/lib/gpufleet/baseline.json"
DEFAULT_MARGIN = 0.10
# Figures compared as a difference rather than a ratio: a slowdown near 0 (0.02 -> 0.04)
# doubles without meaning anything; a rise of more than the margin in absolute terms does.
ABSOLUTE_KINDS = frozenset({"slowdown"})


class BaselineError(ValueError):
    """A baseline file or margin that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class Regression:
    """One figure that fell (or, for slowdowns, rose) beyond its margin since the baseline."""

    host: str
    key: str
    kind: str
    baseline: float
    current: float
    change: float  # relative change (-0.18 = fell 18 %); absolute for slowdowns
    margin: float
    threshold: float | None
    meets_threshold: bool | None
    baseline_run_id: str
    run_id: str

    @property
    def message(self) -> str:
        """``xla/speedup fell 18 % since the baseline (1.42 -> 1.16); still meets 1.1``."""
        if self.kind in ABSOLUTE_KINDS:
            moved = f"rose by {self.change:+.3g}"
        else:
            moved = f"fell {abs(self.change) * 100:.0f} %"
        threshold = ""
        if self.meets_threshold is not None:
            side = "still meets" if self.meets_threshold else "also misses"
            threshold = f"; {side} its threshold {self.threshold:g}"
        return (
            f"{self.key} {moved} since the baseline ({self.baseline:.3g} -> "
            f"{self.current:.3g}, margin {self.margin:.0%}){threshold}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message}


def safe_name(name: str) -> str:
    """A host's folder name under a results directory, one per host name: other characters
    percent-escaped (``@ssh/gpu-b`` -> ``@ssh%2Fgpu-b``), a leading ``.`` too, so no name is
    ``.``, ``..`` or hidden. ``gpufleet validate``, ``drift`` and the baselines all use it."""
    escaped = re.sub(
        r"[^A-Za-z0-9_.@-]",
        lambda m: "".join(f"%{b:02X}" for b in m[0].encode("utf-8", "surrogatepass")),
        name,
    )
    return "%2E" + escaped[1:] if escaped.startswith(".") else escaped or "%"


def baseline_path(results_dir: str | Path, host: str) -> Path:
    """``RESULTS_DIR/<host>/baseline.json``."""
    return Path(results_dir) / safe_name(host) / BASELINE_NAME


def qualifies(document: Mapping[str, Any]) -> bool:
    """A run can be a baseline when it is a full-tier run that passed."""
    return document.get("tier") == "full" and document.get("status") == "pass"


def load_baseline(path: str | Path) -> dict[str, Any] | None:
    """The baseline document at ``path``, or None when there is none yet."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # also not UTF-8, nested too deep
        raise BaselineError(
            f"baseline {path} is unreadable ({exc}); delete it and the next passing full "
            "validation becomes the baseline"
        ) from None
    try:
        validate_results(document)
    except ResultsSchemaError as exc:
        raise BaselineError(f"baseline {path} is not a results document: {exc}") from None
    return dict(document)


def write_baseline(path: str | Path, document: Mapping[str, Any]) -> Path:
    """Write ``document`` as the baseline at ``path`` (atomically); refuses one that can't be."""
    if not qualifies(document):
        raise BaselineError(
            f"run {document.get('run_id')} of {document.get('host')} is a "
            f"{document.get('tier')} run with status {document.get('status')}; only a passing "
            "full validation can be a baseline (gpufleet validate INVENTORY --tier full)"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(document, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def record_run(results_dir: str | Path, document: Mapping[str, Any]) -> Path | None:
    """Make ``document`` its host's baseline if it qualifies and the host has none yet.

    Returns the baseline's path when this run became it, else None. Call after every
    ``gpufleet validate``; the first passing full run per host wins.
    """
    path = baseline_path(results_dir, str(document.get("host", "")))
    if not qualifies(document) or load_baseline(path) is not None:
        return None
    return write_baseline(path, document)


def check_margin(margin: float) -> float:
    """A margin as a fraction in (0, 1); 10 means 10 %, which is refused with the fix."""
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 < margin < 1:
        raise BaselineError(
            f"regression margin {margin!r} must be a fraction between 0 and 1 (0.10 for 10 %)"
        )
    return float(margin)


def _regressed(before: Figure, after: Figure, margin: float) -> tuple[bool, float]:
    if before.kind in ABSOLUTE_KINDS:
        change = after.value - before.value
        worse = change if not before.higher_is_better else -change
        return worse > margin, change
    if before.value == 0:
        return False, 0.0
    change = (after.value - before.value) / abs(before.value)
    worse = -change if before.higher_is_better else change
    return worse > margin, change


def compare(
    baseline: Mapping[str, Any],
    document: Mapping[str, Any],
    *,
    margin: float = DEFAULT_MARGIN,
    margins: Mapping[str, float] | None = None,
) -> list[Regression]:
    """The figures of ``document`` that regressed against ``baseline`` beyond their margin.

    ``margins`` overrides the margin per figure key (``{"xla/speedup": 0.2}``). Only runs of
    the baseline's tier are compared (quick runs use smaller sizes, so their figures differ),
    and only figures that apply on both sides (a no-GPU "not applicable" figure is noise).
    """
    margin = check_margin(margin)
    per_key = {key: check_margin(value) for key, value in (margins or {}).items()}
    if document.get("tier") != baseline.get("tier") or document.get("run_id") == baseline.get(
        "run_id"
    ):
        return []
    before = {f.key: f for f in figures_of(baseline) if f.applicable}
    found = []
    for after in figures_of(document):
        base = before.get(after.key)
        if base is None or not after.applicable:
            continue
        allowed = per_key.get(after.key, margin)
        regressed, change = _regressed(base, after, allowed)
        if regressed:
            found.append(
                Regression(
                    host=str(document.get("host", "")),
                    key=after.key,
                    kind=after.kind,
                    baseline=base.value,
                    current=after.value,
                    change=change,
                    margin=allowed,
                    threshold=after.threshold,
                    meets_threshold=after.meets_threshold,
                    baseline_run_id=str(baseline.get("run_id", "")),
                    run_id=str(document.get("run_id", "")),
                )
            )
    return found
