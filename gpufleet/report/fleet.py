"""A results directory read as a fleet: each host's runs, baseline, drift and regressions.

Layout (what ``gpufleet validate --results-dir DIR`` writes, plus the optional files)::

    DIR/<host>/<run_id>.json     one results document per run
    DIR/<host>/baseline.json     the host's baseline (gpufleet.validate.baseline)
    DIR/<host>/drift.json        optional: gpufleet drift's {"changes": ["libnccl2 no longer
                                 held", ...], ...} (or a bare list of changes)
    DIR/junit/                   JUnit XML, ignored here

Example: ``fleet = load_fleet(Path("results")); fleet.hosts[0].latest["status"]``
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from gpufleet.report.figures import Figure, figures_of
from gpufleet.report.schema import new_document, validate_results
from gpufleet.text import redact_data
from gpufleet.validate import baseline as baselines

NOT_RUNS = frozenset(
    {baselines.BASELINE_NAME, "baseline-quick.json", "drift.json", "latest.json", "state.json"}
)
# What reading a host's JSON file can raise: unreadable, not UTF-8 or not JSON (ValueError),
# nested deeper than Python's recursion limit (RecursionError).
UNREADABLE = (OSError, ValueError, RecursionError)
# Checks are shown in the suite's order: declared state, GPU health, workloads, then others.
CHECK_GROUPS = ("host_state", "gpu_health", "workloads")


class FleetError(ValueError):
    """A results directory that holds nothing to report; the message says what was expected."""


@dataclass
class HostReport:
    """One host: its runs (oldest first), baseline, drift and the latest run's regressions."""

    name: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    baseline_note: str = ""
    drift: Drift | None = None
    regressions: list[baselines.Regression] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files that could not be read
    unreadable: bool = False  # no results file could be read: ``runs`` is one stand-in error

    @property
    def latest(self) -> dict[str, Any]:
        return self.runs[-1]

    @property
    def figures(self) -> list[Figure]:
        return figures_of(self.latest)

    @property
    def checks(self) -> dict[str, dict[str, Any]]:
        return {str(c["name"]): c for c in self.latest.get("checks", [])}


@dataclass
class Fleet:
    """Every host of a results directory, sorted by name."""

    root: Path
    hosts: list[HostReport]
    margin: float
    margins: dict[str, float] = field(default_factory=dict)

    @property
    def check_names(self) -> list[str]:
        """Every check any host's latest run has, grouped as the suite runs them."""
        names = {name for host in self.hosts for name in host.checks}

        def order(name: str) -> tuple[int, str]:
            group = name.split("::", 1)[0]
            rank = CHECK_GROUPS.index(group) if group in CHECK_GROUPS else len(CHECK_GROUPS)
            return (rank, name)

        return sorted(names, key=order)


@dataclass
class Drift:
    """A host's drift.json: what differs, what may differ, quick-tier failures, when checked."""

    changes: list[str] = field(default_factory=list)
    conditional: list[str] = field(default_factory=list)
    validation_failures: list[str] = field(default_factory=list)
    status: str = ""
    reason: str = ""
    checked_at: str = ""


def _strings(raw: Any) -> list[str]:
    return [str(item) for item in raw] if isinstance(raw, list) else []


def read_drift(path: Path) -> Drift | None:
    """A host's drift.json (as ``gpufleet drift --results-dir`` writes it, or a bare list of
    changes), or None when there is none."""
    try:
        raw = redact_data(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except UNREADABLE as exc:
        return Drift(status="error", reason=f"drift.json could not be read: {_why(exc)}")
    if isinstance(raw, list):
        return Drift(changes=_strings(raw))
    if not isinstance(raw, Mapping):
        return Drift(status="error", reason=f"drift.json holds a {type(raw).__name__}")
    failures = [
        f"{f.get('check')} ({f.get('status')})" + (f": {f['message']}" if f.get("message") else "")
        for f in raw.get("validation_failures") or ()
        if isinstance(f, Mapping)
    ]
    return Drift(
        changes=_strings(raw.get("changes")),
        conditional=_strings(raw.get("conditional")),
        validation_failures=failures,
        status=str(raw.get("status") or ""),
        reason=str(raw.get("reason") or ""),
        checked_at=str(raw.get("checked_at") or ""),
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to be a results document"
    return str(exc)


def unreadable_document(host: str, problems: list[str]) -> dict[str, Any]:
    """The stand-in latest run of a host none of whose files could be read: an ``error`` row,
    so the host shows in the report instead of vanishing."""
    return new_document(
        host=host,
        run_id="",
        started_at="",
        tier="quick",
        target="",
        spec={},
        checks=[],
        workloads=[],
        gpu_health=None,
        run_error="no readable results document: " + "; ".join(problems),
    )


def _run_key(doc: Mapping[str, Any]) -> tuple[str, str]:
    return (str(doc.get("started_at") or ""), str(doc.get("run_id") or ""))


def load_host(
    folder: Path, *, margin: float, margins: Mapping[str, float] | None = None
) -> HostReport | None:
    """One host's folder; None when it holds no results file at all. When every results file
    is unreadable, the host gets one ``error`` run that says why."""
    report = HostReport(name=folder.name)
    for path in sorted(folder.glob("*.json")):
        if path.name in NOT_RUNS:
            continue
        try:
            doc = redact_data(json.loads(path.read_text()))
            validate_results(doc)
        except UNREADABLE as exc:  # ResultsSchemaError is a ValueError
            report.problems.append(f"{path.name}: {_why(exc)}")
            continue
        report.runs.append(doc)
    if not report.runs:
        if not report.problems:
            return None
        stand_in = unreadable_document(unquote(folder.name), report.problems)
        report.runs.append(redact_data(stand_in))
        report.name = report.latest["host"]
        report.unreadable = True
        return report
    report.runs.sort(key=_run_key)
    report.name = str(report.latest.get("host") or redact_data(folder.name))
    # The latest run's tier's baseline (a quick run against the full tier's figures compares
    # nothing alike): baseline.json or baseline-quick.json, as validate keeps them.
    tier = str(report.latest.get("tier") or "full")
    name = baselines.baseline_name(tier)
    try:
        report.baseline = baselines.load_baseline(folder / name)
        report.baseline_note = name if report.baseline else ""
    except baselines.BaselineError as exc:
        report.problems.append(str(exc))
    if report.baseline is None:
        # No recorded baseline yet: the tier's first passing run stands in, unless it is the
        # latest run itself (which would be compared with itself).
        first = next(
            (d for d in report.runs if d.get("tier") == tier and baselines.qualifies(d)), None
        )
        if first is not None and first is not report.latest:
            report.baseline = first
            report.baseline_note = f"first passing {tier} run (no {name} yet)"
    report.drift = read_drift(folder / "drift.json")
    if report.baseline is not None:
        report.regressions = baselines.compare(
            report.baseline,
            report.latest,
            margin=margin,
            margins=margins,
            history=report.runs[:-1],
        )
    return report


def load_fleet(
    root: Path,
    *,
    margin: float = baselines.DEFAULT_MARGIN,
    margins: Mapping[str, float] | None = None,
) -> Fleet:
    """Every host folder under ``root``; raises FleetError when there is nothing to report.

    ``margins`` overrides the regression margin per figure (``{"xla/speedup": 0.2}``).
    """
    baselines.check_margin(margin)
    for value in (margins or {}).values():
        baselines.check_margin(value)
    if not root.is_dir():
        raise FleetError(
            f"{root} is not a directory; pass the --results-dir of `gpufleet validate` "
            "(default: results)"
        )
    hosts = []
    # Every folder: host folders are named by safe_name, so none is hidden and a host called
    # "junit" shares the JUnit folder; a folder without results files is simply not a host.
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        host = load_host(folder, margin=margin, margins=margins)
        if host is not None:
            hosts.append(host)
    if all(host.unreadable for host in hosts):
        unreadable = [f"{h.name}/{p}" for h in hosts for p in h.problems]
        raise FleetError(
            f"no results documents under {root}/<host>/*.json"
            + (f" that can be read ({'; '.join(unreadable)[:2000]})" if unreadable else "")
            + f"; run `gpufleet validate INVENTORY --results-dir {root}` first"
        )
    hosts.sort(key=lambda h: h.name)
    return Fleet(root=root, hosts=hosts, margin=margin, margins=dict(margins or {}))


def figure_dict(item: Figure) -> dict[str, Any]:
    return {
        "key": item.key,
        "name": item.name,  # the one dotted name (gpufleet.floors.names)
        "kind": item.kind,
        "variant": item.variant,
        "value": item.value,
        "unit": item.unit,
        "threshold": item.threshold,
        "higher_is_better": item.higher_is_better,
        "meets_threshold": item.meets_threshold,
        "applicable": item.applicable,
        "ci": list(item.ci) if item.ci else None,
    }


def summary(fleet: Fleet) -> dict[str, Any]:
    """The fleet as plain JSON data (``gpufleet report --json``)."""
    hosts = []
    for host in fleet.hosts:
        latest = host.latest
        hosts.append(
            {
                "host": host.name,
                "status": latest["status"],
                "tier": latest["tier"],
                "run_id": latest["run_id"],
                "started_at": latest["started_at"],
                "run_error": latest["run_error"],
                "summary": latest["summary"],
                "checks": {
                    name: {"status": c["status"], "message": c.get("message", "")}
                    for name, c in host.checks.items()
                },
                "figures": [figure_dict(f) for f in host.figures],
                "baseline_run_id": host.baseline["run_id"] if host.baseline else None,
                "baseline_note": host.baseline_note,
                "regressions": [r.to_dict() for r in host.regressions],
                "drift": None if host.drift is None else asdict(host.drift),
                "runs": len(host.runs),
                "problems": host.problems,
            }
        )
    return {
        "results_dir": str(fleet.root),
        "regression_margin": fleet.margin,
        "figure_margins": fleet.margins,
        "checks": fleet.check_names,
        "hosts": hosts,
    }
