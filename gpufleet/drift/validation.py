"""The quick validation tier for `gpufleet drift`: run `gpufleet validate` and read its results.

`gpufleet validate` runs in its own process (it starts pytest per host) and writes
``DIR/<host>/<run_id>.json``; it prints ``results: DIR/*/<run_id>.json`` at the end, which
is how this module finds the documents of the run it started.

Example: ``run = run_validation("inventories/sandbox.py", Path("results"))``
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.validate.baseline import safe_name

_RESULTS_LINE = re.compile(r"^results: .*/\*/(?P<run_id>[^/\s]+)\.json", re.MULTILINE)


@dataclass
class ValidationRun:
    """One quick-tier run: each host's results document (None where none was written)."""

    returncode: int
    documents: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    problem: str = ""  # why documents are missing, for the report


def validate_command(inventory: str, results_dir: Path, limits: Sequence[str] = ()) -> list[str]:
    """``gpufleet validate INVENTORY --tier quick --results-dir DIR`` as this Python runs it."""
    command = [sys.executable, "-m", "gpufleet.cli", "validate", inventory, "--tier", "quick"]
    command += ["--results-dir", str(results_dir)]
    for limit in limits:
        command += ["--limit", limit]
    return command


def run_id_of(stdout: str) -> str | None:
    """The run id in validate's closing ``results: DIR/*/RUN_ID.json`` line."""
    found = _RESULTS_LINE.search(stdout)
    return found["run_id"] if found else None


def read_documents(
    results_dir: Path, run_id: str, host_names: Sequence[str]
) -> dict[str, dict[str, Any] | None]:
    """Each host's ``DIR/<host>/<run_id>.json``, or None when it is missing or unreadable."""
    documents: dict[str, dict[str, Any] | None] = {}
    for name in host_names:
        path = results_dir / safe_name(name) / f"{run_id}.json"
        try:
            loaded = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            loaded = None
        documents[name] = loaded if isinstance(loaded, dict) else None
    return documents


def run_validation(
    inventory: str,
    results_dir: Path,
    host_names: Sequence[str],
    *,
    limits: Sequence[str] = (),
    timeout: float = 3600.0,
) -> ValidationRun:
    """Run the quick tier on every host and collect its documents.

    Never raises for a validation that could not run: the hosts then carry no document and
    ``problem`` says why, so the drift report can name it.
    """
    command = validate_command(inventory, results_dir, limits)
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ValidationRun(
            returncode=124,
            documents=dict.fromkeys(host_names),
            problem=f"`gpufleet validate --tier quick` took over {timeout:.0f} s",
        )
    run_id = run_id_of(proc.stdout)
    if run_id is None:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        return ValidationRun(
            returncode=proc.returncode,
            documents=dict.fromkeys(host_names),
            problem=f"`gpufleet validate` (exit {proc.returncode}) wrote no results: {tail}",
        )
    documents = read_documents(results_dir, run_id, host_names)
    return ValidationRun(
        returncode=proc.returncode,
        documents=documents,
        problem=f"no {run_id}.json under {results_dir} for this host",
    )
