"""Baselines: a host's figures over several qualifying runs per tier, and regressions against them.

A host's baseline for a tier holds the headline figures of its first qualifying runs (five
for the full tier, gathered at acceptance by running ``gpufleet validate --tier full`` five
times; twenty for the quick tier, which the host's periodic runs gather by themselves). A
later figure is judged with ``regression_verdict``: against the level and run-to-run spread of
those runs, by a CUSUM over the runs since, not by a fixed cut. A run qualifies when it passed
outright: an ``unproven`` run (a speed check inconclusive) never becomes a baseline.

Example::

    path = record_run(Path("results"), document)    # results/<host>/baseline.json, 1 of 5 runs
    for regression in compare(load_baseline(path), later_document):
        print(regression.message)

Standard library only (runs on the hosts as well as on the control node).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpufleet.floors.names import name_of_key
from gpufleet.report.figures import figures_of
from gpufleet.report.schema import ResultsSchemaError, validate_results
from gpufleet.validate.regression import (
    DETECT_DROP,
    INCONCLUSIVE,
    OK,
    REGRESSED,
    RegressionVerdict,
    regression_verdict,
)

__all__ = ["INCONCLUSIVE", "OK", "REGRESSED", "RegressionVerdict", "regression_verdict"]

BASELINE_NAME = "baseline.json"  # the full tier's; the quick tier's is baseline-quick.json
HOST_BASELINE_PATH = "/var/lib/gpufleet/baseline.json"
BASELINE_VERSION = 2
RUNS_WANTED = {"full": 5, "quick": 20}
DEFAULT_MARGIN = DETECT_DROP  # the drop the detector is tuned to catch (10 %)
# Figures compared as a difference rather than a ratio: a slowdown near 0 (0.02 -> 0.04)
# doubles without meaning anything; a rise of more than the margin in absolute terms does.
ABSOLUTE_KINDS = frozenset({"slowdown"})


class BaselineError(ValueError):
    """A baseline file or margin that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class Regression:
    """One figure that regressed (or vanished) against the host's baseline runs."""

    host: str
    key: str
    kind: str
    baseline: float | None  # mean over the baseline's runs
    current: float | None  # None: the figure is missing or not finite now
    change: float | None  # relative change (-0.18 = fell 18 %); absolute for slowdowns
    margin: float
    threshold: float | None
    meets_threshold: bool | None
    baseline_run_id: str
    run_id: str
    reason: str = ""

    @property
    def message(self) -> str:
        """``xla/speedup regressed: speedup 1.16, -18.0 % against the baseline level (...)``."""
        threshold = ""
        if self.meets_threshold is not None:
            side = "still meets" if self.meets_threshold else "also misses"
            threshold = f"; {side} its threshold {self.threshold:g}"
        return f"{self.key}: {self.reason}{threshold}"

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


def baseline_name(tier: str = "full") -> str:
    """``baseline.json`` (full tier) or ``baseline-quick.json``."""
    return BASELINE_NAME if tier == "full" else f"baseline-{tier}.json"


def baseline_path(results_dir: str | Path, host: str, tier: str = "full") -> Path:
    """``RESULTS_DIR/<host>/baseline.json`` (full tier) or ``baseline-quick.json``."""
    return Path(results_dir) / safe_name(host) / baseline_name(tier)


def qualifies(document: Mapping[str, Any]) -> bool:
    """A run can join a baseline when it passed outright: no inconclusive check, no error, and
    every check run (no ``selection``: a ``--select`` run is partial).

    (A schema_version 1 document could say "pass" with an inconclusive check; it does not
    qualify either.)
    """
    checks = document.get("checks") or ()
    return (
        document.get("tier") in RUNS_WANTED
        and document.get("status") == "pass"
        and not document.get("selection")  # a partial (--select) run measures only part
        and not any(c.get("status") == "inconclusive" for c in checks if isinstance(c, Mapping))
    )


def run_figures(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The compared figures of a run: one per measurement, applicable ones only."""
    return {
        f.key: {
            "value": f.value,
            "kind": f.kind,
            "higher_is_better": f.higher_is_better,
            "threshold": f.threshold,
        }
        for f in figures_of(document)
        if f.applicable and f.compared
    }


def _entry(document: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": str(document.get("run_id", "")),
        "started_at": str(document.get("started_at", "")),
        "figures": run_figures(document),
    }


def new_baseline(host: str, tier: str) -> dict[str, Any]:
    return {
        "baseline_version": BASELINE_VERSION,
        "host": host,
        "tier": tier,
        "wanted": RUNS_WANTED.get(tier, 5),
        "runs": [],
    }


def complete(baseline: Mapping[str, Any]) -> bool:
    """Whether the baseline holds the runs it wants (after that it no longer changes)."""
    return len(baseline.get("runs") or ()) >= int(baseline.get("wanted", 5))


def load_baseline(path: str | Path) -> dict[str, Any] | None:
    """The baseline at ``path``, or None when there is none yet.

    A version-1 baseline (one results document) is read as a baseline of that one run.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # also not UTF-8, nested too deep
        raise BaselineError(
            f"baseline {path} is unreadable ({exc}); delete it and the next qualifying runs "
            "rebuild it"
        ) from None
    if isinstance(raw, dict) and raw.get("baseline_version") == BASELINE_VERSION:
        runs = raw.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise BaselineError(f"baseline {path}: 'runs' must be a list of objects")
        return with_run_id(raw)
    try:
        validate_results(raw)
    except ResultsSchemaError as exc:
        raise BaselineError(
            f"baseline {path} is not a baseline or results document: {exc}"
        ) from None
    baseline = new_baseline(str(raw.get("host", "")), str(raw.get("tier", "full")))
    baseline["runs"].append(_entry(raw))
    return with_run_id(baseline)


def with_run_id(baseline: dict[str, Any]) -> dict[str, Any]:
    """``baseline`` with ``run_id``: its runs' ids, comma-separated (what reports show)."""
    baseline["run_id"] = ",".join(str(r.get("run_id", "")) for r in baseline.get("runs") or ())
    return baseline


def write_baseline(path: str | Path, baseline: Mapping[str, Any]) -> Path:
    """Write ``baseline`` at ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(baseline, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def add_run(path: str | Path, document: Mapping[str, Any]) -> dict[str, Any] | None:
    """Add ``document`` to the baseline at ``path`` if it qualifies and the baseline is still
    gathering runs; returns the updated baseline, else None."""
    if not qualifies(document):
        return None
    tier = str(document.get("tier"))
    baseline = load_baseline(path) or new_baseline(str(document.get("host", "")), tier)
    if baseline.get("tier") != tier or complete(baseline):
        return None
    if any(r.get("run_id") == document.get("run_id") for r in baseline["runs"]):
        return None
    if baseline["runs"] and not set(baseline["runs"][0].get("figures") or {}) <= set(
        run_figures(document)
    ):
        return None  # a run without a figure the baseline has would leave a hole in it
    baseline["runs"].append(_entry(document))
    write_baseline(path, {k: v for k, v in baseline.items() if k != "run_id"})
    return with_run_id(baseline)


def record_run(results_dir: str | Path, document: Mapping[str, Any]) -> Path | None:
    """Add ``document`` to its host's baseline of its tier when it qualifies and that baseline
    is still gathering runs. Returns the baseline's path when it did, else None."""
    path = baseline_path(results_dir, str(document.get("host", "")), str(document.get("tier")))
    return path if add_run(path, document) is not None else None


def check_margin(margin: float) -> float:
    """A margin as a fraction in (0, 1); 10 means 10 %, which is refused with the fix."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise BaselineError(
            f"regression margin {margin!r} must be a fraction between 0 and 1 (0.10 for 10 %)"
        )
    return float(margin)


def _value(document: Mapping[str, Any], key: str) -> float | None:
    return run_figures(document).get(key, {}).get("value")


def margin_of(key: str, margins: Mapping[str, float], default: float) -> float:
    """The margin for figure ``key`` (WORKLOAD/METRIC): given by that key, else by the figure's
    dotted name (``xla.speedup.amp``, gpufleet.floors.names), else ``default``."""
    return margins.get(key, margins.get(name_of_key(key), default))


def compare_history(
    baseline: Mapping[str, Any],
    documents: Sequence[Mapping[str, Any]],
    *,
    margin: float = DEFAULT_MARGIN,
    margins: Mapping[str, float] | None = None,
) -> dict[str, RegressionVerdict]:
    """Per baseline figure, its regression verdict over ``documents`` (oldest first: the runs
    of the baseline's tier since it was gathered). Each measurement is compared once."""
    margin = check_margin(margin)
    per_key = {key: check_margin(value) for key, value in (margins or {}).items()}
    taken = {str(r.get("run_id")) for r in baseline.get("runs") or ()}
    later = [
        d
        for d in documents
        if d.get("tier") == baseline.get("tier")
        and str(d.get("run_id")) not in taken
        and d.get("status") != "error"
    ]
    if not later:
        return {}
    runs = baseline.get("runs") or ()
    keys: dict[str, dict[str, Any]] = {}
    for run in runs:
        for key, figure in (run.get("figures") or {}).items():
            keys.setdefault(key, figure)
    verdicts = {}
    for key, figure in keys.items():
        values = [(r.get("figures") or {}).get(key, {}).get("value") for r in runs]
        verdicts[key] = regression_verdict(
            values,
            [_value(d, key) for d in later],
            higher_is_better=bool(figure.get("higher_is_better", True)),
            absolute=figure.get("kind") in ABSOLUTE_KINDS,
            drop=margin_of(key, per_key, margin),
            what=key.split("/", 1)[-1],
        )
    return verdicts


def compare(
    baseline: Mapping[str, Any],
    document: Mapping[str, Any],
    *,
    margin: float = DEFAULT_MARGIN,
    margins: Mapping[str, float] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> list[Regression]:
    """The figures of ``document`` that regressed against ``baseline`` (or vanished from it).

    ``baseline`` is a baseline (load_baseline) or, for old callers, a results document.
    ``history`` holds the earlier runs since the baseline (oldest first) for the CUSUM;
    ``margin`` is the drop the detector is tuned to catch (``margins`` per figure key). Only
    runs of the baseline's tier are compared, and nothing while the baseline is gathering runs.
    """
    if baseline.get("baseline_version") != BASELINE_VERSION:
        converted = new_baseline(str(baseline.get("host", "")), str(baseline.get("tier", "")))
        converted["runs"].append(_entry(baseline))
        baseline = converted
    if document.get("tier") != baseline.get("tier"):
        return []
    verdicts = compare_history(
        baseline, [*history, document], margin=check_margin(margin), margins=margins
    )
    now = {f.key: f for f in figures_of(document)}
    found = []
    for key, verdict in verdicts.items():
        if verdict.status != REGRESSED:
            continue
        runs = baseline.get("runs") or ()
        values = [(r.get("figures") or {}).get(key, {}).get("value") for r in runs]
        values = [v for v in values if isinstance(v, (int, float))]
        figure = now.get(key)
        kind = next(
            (
                (r.get("figures") or {}).get(key, {}).get("kind")
                for r in runs
                if key in r.get("figures", {})
            ),
            "",
        )
        found.append(
            Regression(
                host=str(document.get("host", "")),
                key=key,
                kind=str(kind),
                baseline=sum(values) / len(values) if values else None,
                current=figure.value if figure and figure.applicable else None,
                change=verdict.change,
                margin=margin_of(key, margins or {}, margin),
                threshold=figure.threshold if figure else None,
                meets_threshold=figure.meets_threshold if figure else None,
                baseline_run_id=",".join(str(r.get("run_id", "")) for r in runs),
                run_id=str(document.get("run_id", "")),
                reason=verdict.reason,
            )
        )
    return found
