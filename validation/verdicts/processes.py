"""One workload document from several fresh processes: speed checks judged over all of them.

The noise between fresh processes (CUDA context, clocks, memory placement, autotuner picks) is
as large as the effects a speed check judges, so the suite and the periodic runner run each
workload several times (validation.verdicts.tiers.PROCESSES) and judge its speed checks here,
through judge_runs / judge_sample_runs, over the pairs or samples every process recorded.

Example:
    >>> merged = merge_processes([doc_1, doc_2, doc_3])   # Workload JSON documents
    >>> merged["processes"], merged["verdict"]["status"]
    (3, 'pass')

Pure (numpy, the standard library and the harness): no TensorFlow, no processes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from validation.verdicts.harness import (
    FAIL,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    PASS,
    HarnessError,
    Judgement,
    Verdict,
    combine,
    judge_runs,
    judge_sample_runs,
)
from validation.workloads._run import record_metric

# Worst first: the merged status of a check that has no evidence to judge again.
_SEVERITY = (FAIL, INCONCLUSIVE, PASS, NOT_APPLICABLE)


def _worst(statuses: Sequence[str]) -> str:
    known = [s for s in statuses if s in _SEVERITY]
    return min(known, key=_SEVERITY.index) if known else INCONCLUSIVE


def _rejudge(
    checks: Sequence[Mapping[str, Any]], looks: int = 1
) -> tuple[Verdict, Judgement | None]:
    """The verdict of one speed check over every process's evidence."""
    evidence = [c.get("evidence") for c in checks]
    statuses = [str(c.get("status")) for c in checks]
    if NOT_APPLICABLE in statuses:
        skipped = next(c for c in checks if c.get("status") == NOT_APPLICABLE)
        return Verdict(NOT_APPLICABLE, str(skipped.get("reason", ""))), None
    if any(not isinstance(e, Mapping) or not e.get("runs") for e in evidence):
        # A process refused its measurement (HarnessError) or wrote none: no joint verdict.
        status = _worst(statuses)
        reasons = "; ".join(str(c.get("reason", "")) for c in checks if c.get("status") == status)
        return Verdict(status, reasons), None
    first: Mapping[str, Any] = evidence[0]  # type: ignore[assignment]
    runs = [run for e in evidence for run in e["runs"]]  # type: ignore[index]
    threshold = float(first["threshold"])
    sd = first.get("between_run_sd")
    try:
        if first.get("type") == "samples":
            what = str(first.get("what", "figure"))
            judged = judge_sample_runs(runs, threshold, what=what, between_run_sd=sd, looks=looks)
        else:
            judged = judge_runs(runs, threshold, between_run_sd=sd, looks=looks)
    except HarnessError as exc:
        return Verdict(INCONCLUSIVE, f"measurement refused: {exc}"), None
    return judged.verdict, judged


def _median_metrics(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first process's metrics, each plain number replaced by the median over processes."""
    merged = copy.deepcopy(dict(docs[0].get("metrics") or {}))
    for key, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        values = [d.get("metrics", {}).get(key) for d in docs]
        numbers = sorted(float(v) for v in values if isinstance(v, (int, float)))
        if len(numbers) == len(docs) and all(math.isfinite(v) for v in numbers):
            middle = len(numbers) // 2
            merged[key] = (
                numbers[middle]
                if len(numbers) % 2
                else (numbers[middle - 1] + numbers[middle]) / 2.0
            )
    return merged


def speed_at_stake(doc: Mapping[str, Any]) -> bool:
    """Whether a workload document has a speed check that applies (more processes help it)."""
    return any(
        c.get("evidence") is not None and c.get("status") != NOT_APPLICABLE
        for c in doc.get("checks") or ()
    )


def undecided(doc: Mapping[str, Any]) -> bool:
    """Whether a (merged) document has a speed check with evidence (or a joint judgement) that is
    still inconclusive: another process may decide it. A check a busy GPU made inconclusive
    has neither, so it never asks for more processes."""
    return any(
        c.get("status") == INCONCLUSIVE
        and (c.get("evidence") is not None or c.get("judgement") is not None)
        for c in doc.get("checks") or ()
    )


def merge_processes(docs: Sequence[Mapping[str, Any]], looks: int = 1) -> dict[str, Any]:
    """One Workload JSON document from the documents of several processes of one workload.

    Speed checks with evidence are judged again over all processes (their metric becomes the
    joint estimate); any other check takes its worst status over the processes (fail, then
    inconclusive, then pass). ``processes`` counts them; ``process_verdicts`` keeps theirs.
    ``looks``: the most processes the caller runs, adding one while a check is inconclusive
    (validation.verdicts.tiers.PROCESSES); every verdict then shares alpha among them, even the
    first.
    """
    if not docs:
        raise ValueError("merge_processes needs at least one workload document")
    names = {d.get("workload") for d in docs}
    if len(names) != 1:
        raise ValueError(
            f"documents of different workloads cannot be merged: {sorted(map(str, names))}"
        )
    merged = copy.deepcopy(dict(docs[0]))
    if len(docs) == 1 and (looks == 1 or not speed_at_stake(docs[0])):
        # nothing to judge again: the process's own verdict stands
        merged["processes"] = 1
        return merged
    merged["metrics"] = _median_metrics(docs)
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for doc in docs:
        for check in doc.get("checks") or ():
            by_name.setdefault(str(check.get("name")), []).append(check)
    checks: list[dict[str, Any]] = []
    for found in by_name.values():
        entry = {k: v for k, v in found[0].items() if k != "evidence"}
        if len(found) < len(docs):
            verdict = Verdict(INCONCLUSIVE, f"only {len(found)} of {len(docs)} processes ran it")
            judged = None
        elif found[0].get("evidence") is not None:
            verdict, judged = _rejudge(found, looks)
        else:
            status = _worst([str(c.get("status")) for c in found])
            reason = next(str(c.get("reason", "")) for c in found if c.get("status") == status)
            verdict, judged = Verdict(status, reason), None
        entry.update(verdict.to_dict())
        if judged is not None:
            entry["judgement"] = judged.to_dict()
            evidence = found[0]["evidence"]
            if evidence.get("metric") and judged.estimate is not None:
                estimate = judged.estimate.to_dict()
                record_metric(
                    merged["metrics"],
                    evidence["metric"],
                    estimate,
                    invert=bool(evidence.get("invert")),
                )
        checks.append(entry)
    merged["checks"] = checks
    merged["processes"] = len(docs)
    merged["process_verdicts"] = [dict(d.get("verdict") or {}) for d in docs]
    crashed = [
        d["verdict"]
        for d in docs
        if (d.get("verdict") or {}).get("status") == FAIL and not d.get("checks")
    ]
    verdict = combine([(c["name"], Verdict(c["status"], c["reason"])) for c in checks])
    if crashed:
        verdict = Verdict(FAIL, "; ".join(str(v.get("reason", "")) for v in crashed))
    merged["verdict"] = verdict.to_dict()
    return merged
