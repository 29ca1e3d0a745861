"""The check names gpufleet prints (`host_state::os_supported`), listed and used by `--select`."""

from __future__ import annotations

import ast
import difflib
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

SUITE_DIR = Path(__file__).resolve().parent.parent.parent / "validation"
SUITE_MODULES = ("test_host_state", "test_gpu_health", "test_vendor_diagnostics", "test_workloads")
# One check name, a glob of them, or a bare group ("host_state" = every check of it).
_NAME = re.compile(r"[\w*?\[\]-]+::[\w*?\[\],.-]+")


class SelectError(ValueError):
    """A --select that names no check gpufleet has; the message lists them."""


@dataclass(frozen=True)
class Selection:
    """What ``--select`` asked for: check names (exact or globs), or a pytest -k expression."""

    names: tuple[str, ...] = ()
    expression: str | None = None


def _functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        node.name.removeprefix("test_")
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def list_checks(tier: str) -> list[str]:
    """Every check a host run of ``tier`` reports, by the name its results carry.

    Example: ``"host_state::os_supported" in list_checks("quick")``
    """
    from validation.verdicts.tiers import TIERS

    names: list[str] = []
    for module in SUITE_MODULES:
        group = module.removeprefix("test_")
        if module == "test_workloads":
            names += [f"{group}::{w}" for w in TIERS[tier]]
            continue
        names += [f"{group}::{f}" for f in _functions(SUITE_DIR / f"{module}.py")]
    return names


def parse_select(select: str | None) -> Selection:
    """Names when every comma- or space-separated part is one (``group::check``), else -k."""
    if not select or not select.strip():
        return Selection()
    parts = [p for p in re.split(r"[,\s]+", select.strip()) if p]
    if all(_NAME.fullmatch(p) for p in parts):
        return Selection(names=tuple(parts))
    return Selection(expression=select)


def check_names(selection: Selection, tier: str) -> None:
    """Refuse a name that matches no check of ``tier``, before any host runs."""
    known = list_checks(tier)
    missing = [n for n in selection.names if not fnmatch.filter(known, n)]
    if missing:
        close = difflib.get_close_matches(missing[0], known, n=1, cutoff=0.7)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise SelectError(
            f"--select {', '.join(missing)}: no {tier}-tier check has that name.{hint} The checks "
            f"are: {', '.join(known)} (gpufleet validate --list-checks --tier {tier})"
        )


def matches(name: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """Whether a check's name is one of the selected names or globs."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def no_match_message(select: str, tier: str) -> str:
    """What a run whose --select matched nothing says instead of "pytest exit status 5"."""
    return (
        f"no check matches --select {select!r}; name checks as gpufleet prints them "
        f"(e.g. host_state::os_supported) or give a pytest -k expression; list them with "
        f"`gpufleet validate INVENTORY --list-checks --tier {tier}`"
    )
