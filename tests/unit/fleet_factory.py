"""Synthetic results documents for report, baseline and Prometheus tests.

SYNTHETIC: these documents are made up here to exercise GPU-host cases this GPU-less machine
cannot produce (speed-ups, scaling, GPU health). Their shape follows validation/workloads/*
and gpufleet.report.schema; the figures are plausible, not measured. Recorded real documents
live in tests/fixtures/results/ (see SOURCES.md there).
"""

from __future__ import annotations

import json
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from gpufleet import health as gpu_health_rules
from gpufleet.report.schema import new_document
from validation.periodic.checks import judge_workload

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "results"
HOST_STATE_CHECKS = (
    "os_supported",
    "driver_loaded",
    "nouveau_not_loaded",
    "driver_packages_locked",
    "unattended_upgrades_blacklist",
)


def workload(
    name: str,
    metrics: dict[str, Any],
    thresholds: dict[str, float],
    speed: dict[str, str],
    *,
    reason: str = "",
) -> dict[str, Any]:
    """A Workload JSON document; ``speed`` maps speed check names to their status."""
    checks = [{"name": "losses_match", "kind": "correctness", "status": "pass", "reason": "ok"}]
    checks += [
        {"name": check, "kind": "speed", "status": status, "reason": reason or f"{check} {status}"}
        for check, status in speed.items()
    ]
    statuses = {c["status"] for c in checks}
    verdict = "fail" if "fail" in statuses else "pass"
    return {
        "workload": name,
        "schema_version": 1,
        "host": "synthetic",
        "devices": [{"type": "GPU", "name": "/device:GPU:0", "compute_capability": "9.0"}],
        "config": {"quick": False, "thresholds": thresholds},
        "measurements": {},
        "metrics": metrics,
        "checks": checks,
        "verdict": {"status": verdict, "reason": reason or f"{name} {verdict}"},
    }


def gpu_workloads(scale: float = 1.0, *, xla: float = 1.42) -> list[dict[str, Any]]:
    """Plausible H100-host documents of the quick workloads; ``scale`` slows every figure."""

    def judged(value: float, floor: float) -> str:
        return "pass" if value >= floor else "fail"

    eff, fp16, bf16, xla_value = 0.93 * scale, 2.6 * scale, 2.5 * scale, xla * scale
    return [
        workload(
            "mirrored",
            {
                "scaling_efficiency": eff,
                "scaling_efficiency_ci": [eff - 0.02, eff + 0.02],
                "throughput_ratio": eff * 8,
            },
            {"mirrored_scaling_efficiency_min": 0.8},
            {"scaling_efficiency": judged(eff, 0.8)},
        ),
        workload(
            "mixed_precision",
            {"mixed_float16_speedup": fp16, "mixed_bfloat16_speedup": bf16},
            {"mixed_precision_fp16_speedup_min": 1.3, "mixed_precision_bf16_speedup_min": 1.3},
            {
                "mixed_float16_speedup": judged(fp16, 1.3),
                "mixed_bfloat16_speedup": judged(bf16, 1.3),
            },
        ),
        workload(
            "xla",
            {"speedup": xla_value, "speedup_ci": [xla_value - 0.1, xla_value + 0.1]},
            {"xla_speedup_min": 1.1},
            {"xla_speedup": judged(xla_value, 1.1)},
        ),
        workload(
            "gemm",
            {"fp16_tflops": 610.0 * scale, "fp16_fraction_of_peak": 0.62 * scale},
            {"gemm_fp16_fraction_min": 0.5},
            {"fp16_fraction_of_peak": judged(0.62 * scale, 0.5)},
        ),
    ]


def gpu_health(temperature: float = 41.0, *, ecc: int = 0, pending: bool = False) -> dict:
    gpus = [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": f"GPU-0000000{i}",
            "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
            "ecc_uncorrected_volatile": ecc if i == 0 else 0,
            "remapped_rows_pending": pending and i == 0,
            "remapped_rows_failure": False,
            "clock_event_reasons_active": ["gpu_idle"],
            "temperature_c": temperature + i,
            "power_draw_w": 71.5 + i,
        }
        for i in range(2)
    ]
    return {"gpus": gpus, "findings": [], "driver_version": "580.95.05", "cuda_version": "13.0"}


def document(
    host: str,
    *,
    started_at: datetime,
    workloads: list[dict[str, Any]],
    tier: str = "full",
    failing: tuple[str, ...] = (),
    health: dict[str, Any] | None = None,
    run_error: str | None = None,
) -> dict[str, Any]:
    """A results document; ``failing`` names host_state checks that failed."""
    checks = [
        {
            "name": f"host_state::{name}",
            "status": "fail" if name in failing else "pass",
            "message": f"{name}: declared state differs" if name in failing else "",
            "figures": {},
            "duration_s": 0.1,
        }
        for name in HOST_STATE_CHECKS
    ]
    if health is not None:
        findings = gpu_health_rules.evaluate_idle({"gpus": health["gpus"]}, len(health["gpus"]))
        health = {**health, "findings": health["findings"] or [f.to_dict() for f in findings]}
        for name, rule in (
            ("no_uncorrectable_ecc", "ecc"),
            ("no_row_remap_pending_or_failed", "row_remap"),
        ):
            bad = gpu_health_rules.failures(findings, rule)
            checks.append(
                {
                    "name": f"gpu_health::{name}",
                    "status": "fail" if bad else "pass",
                    "message": "; ".join(f.message for f in bad),
                    "figures": {},
                    "duration_s": 0.0,
                }
            )
    checks += [judge_workload(w["workload"], w) for w in workloads]
    if run_error:
        checks = []  # as gpufleet validate records a host it could not reach
    return new_document(
        host=host,
        run_id=f"{started_at:%Y%m%dT%H%M%SZ}-{zlib.crc32(host.encode()) % 0xFFFFFF:06x}",
        started_at=started_at.isoformat(timespec="seconds"),
        finished_at=(started_at + timedelta(seconds=50)).isoformat(timespec="seconds"),
        duration_s=50.0,
        tier=tier,
        target=f"ssh://{host}",
        spec={"tf_version": "2.21.0"},
        checks=checks,
        workloads=workloads,
        gpu_health=health,
        run_error=run_error,
    )


def when(day: int, hour: int = 3) -> datetime:
    return datetime(2026, 11, day, hour, 0, tzinfo=timezone.utc)


def write(results_dir: Path, doc: dict[str, Any]) -> Path:
    """Store ``doc`` as ``gpufleet validate`` does: DIR/<host>/<run_id>.json."""
    path = results_dir / doc["host"] / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def recorded(name: str) -> dict[str, Any]:
    """A recorded real document from tests/fixtures/results/."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def checks_document(
    checks: list[dict[str, Any]],
    *,
    host: str = "h",
    run_id: str = "r",
    started_at: str = "2026-12-01T00:00:00+00:00",
    tier: str = "quick",
    target: str = "ssh://x",
    workloads: list[dict[str, Any]] | None = None,
    run_error: str | None = None,
) -> dict[str, Any]:
    """A results document of exactly ``checks`` (and ``workloads``, none by default): no spec,
    no GPU health, summary and status derived as `new_document` derives them."""
    return new_document(
        host=host,
        run_id=run_id,
        started_at=started_at,
        tier=tier,
        target=target,
        spec={},
        checks=checks,
        workloads=workloads or [],
        gpu_health=None,
        run_error=run_error,
    )
