"""Helpers shared by the security tests of issue 10 (test_security_*.py, test_finding16_*)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from gpufleet.report.schema import new_document
from gpufleet.validate.baseline import safe_name


def results_doc(host: str, message: str = "", run_error: str | None = None) -> dict:
    checks = (
        []
        if run_error
        else [{"name": "host_state::x", "status": "fail", "message": message, "figures": {}}]
    )
    return new_document(
        host=host,
        run_id="20261201T000000Z-abc123",
        started_at="2026-12-01T00:00:00+00:00",
        tier="quick",
        target=f"ssh://{host}",
        spec={},
        checks=checks,
        workloads=[],
        gpu_health=None,
        run_error=run_error,
    )


def write_doc(root: Path, doc: dict) -> Path:
    path = root / safe_name(doc["host"]) / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=200), out


ESCAPES = ("\x1b]", "\x07", "\x1b[2J", "\x9b", "\x9d")  # OSC, BEL, clear screen, C1 CSI / OSC


def assert_no_host_escapes(text: str) -> None:
    for sequence in ESCAPES:
        assert sequence not in text, (sequence, text)


# ---- finding 7: ssh names ---------------------------------------------------------------------


def inventory_file(tmp_path: Path, data: dict, name: str = "gpu-a") -> Path:
    path = tmp_path / "inv.py"
    path.write_text(f"hosts = [({name!r}, {data!r})]\n")
    return path
