"""One host's validation run: where its files go, how the host is reached, its stand-in result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.inventory import InventoryHost
from gpufleet.report.schema import new_document


@dataclass
class HostRun:
    """One host's pytest run: where its files go, and what came back."""

    host: InventoryHost
    alias: str
    expectations_path: Path
    results_path: Path
    junit_path: Path
    log_path: Path
    document: dict[str, Any] | None = None
    returncode: int | None = None


def describe_target(host: InventoryHost) -> str:
    """How the host is reached, for people: ``ssh://ops@10.0.0.5:2222`` or ``local://``."""
    if host.is_local:
        return "local://"
    user = f"{host.ssh_user}@" if host.ssh_user else ""
    port = f":{host.ssh_port}" if host.ssh_port else ""
    return f"ssh://{user}{host.ssh_hostname}{port}"


def error_document(run: HostRun, *, tier: str, run_id: str, started_at: str, why: str) -> dict:
    """The document of a host whose suite could not run: no checks, and ``run_error`` saying why."""
    return new_document(
        host=run.host.name,
        run_id=run_id,
        started_at=started_at,
        tier=tier,
        target=describe_target(run.host),
        spec={},
        checks=[],
        workloads=[],
        gpu_health=None,
        run_error=why,
    )
