"""NVIDIA's own diagnostics: DCGM's `dcgmi diag` (every tier) and nccl-tests' all-reduce (full)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.matrix import gpu_by_device_id
from gpufleet.parsers import parse_dcgm_diag, parse_nccl_tests
from gpufleet.parsers.nccl import NcclTestsParseError, NcclTestsResult
from gpufleet.vendor import Verdict, figure_of, judge_dcgm, judge_nccl
from gpufleet.vendor.section import dcgm_section, nccl_section
from validation.host.hostinfo import HostInfo
from validation.vendor.runs import (
    DCGM_OFF,
    DCGMI_MISSING,
    dcgm_command,
    dcgm_level,
    nccl_tests_command,
    split_rc,
)


def _apply(verdict: Any, record: Any) -> None:
    """Turn a vendor gate's verdict into this check's outcome, with its figures recorded."""
    record(verdict.reason, **verdict.figures)
    if verdict.status in ("fail", "error"):
        pytest.fail(verdict.reason)
    if verdict.status == "skip":
        pytest.skip(verdict.reason)
    if verdict.status == "no_floor":
        pytest.skip(f"no published floor for this host: {verdict.reason}")


def _mig_enabled(host: Any) -> bool:
    result = host.run("nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader")
    return result.rc == 0 and "Enabled" in result.stdout


def test_dcgm_diag(
    host: Any, gpu: HostInfo, spec: Any, tier: str, record: Any, run_state: Any
) -> None:
    """DCGM's `dcgmi diag` at the tier's level (quick 1, full 3) passes on every GPU."""
    level = dcgm_level(spec, tier)

    def judged(verdict: Verdict, result: Any = None) -> None:
        run_state.vendor["dcgm"] = dcgm_section(verdict, level=level, result=result)
        _apply(verdict, record)

    if spec.dcgm == "off":
        judged(Verdict("dcgm_diag", "skip", DCGM_OFF))
    if not host.exists("dcgmi"):
        judged(Verdict("dcgm_diag", "fail", DCGMI_MISSING))
    if _mig_enabled(host):
        judged(judge_dcgm(None, mig_enabled=True, level=level))
    output, rc = split_rc(host.run(dcgm_command(level)).stdout)
    result = parse_dcgm_diag(output, rc)
    judged(judge_dcgm(result, level=level), result)


def test_nccl_allreduce(
    host: Any, gpu: HostInfo, spec: Any, tier: str, record: Any, run_state: Any
) -> None:
    """nccl-tests' all_reduce_perf bus bandwidth across the host's GPUs meets its floor (full)."""
    if tier != "full":
        pytest.skip("nccl-tests all_reduce_perf runs in the full tier")
    gpus = len(gpu.gpus_on_bus)
    if gpus < 2:
        pytest.skip(f"{gpus} GPU: no all-reduce between GPUs to measure")
    binary = f"{spec.nccl_tests_dir}/bin/all_reduce_perf"
    if not host.file(binary).exists:
        pytest.fail(f"{binary} is missing; run the deploy (stage nccl_tests, nccl_tests: on)")
    command = nccl_tests_command(binary, gpus, spec.nccl_tests_min_bytes, spec.nccl_tests_max_bytes)
    output, rc = split_rc(host.run(command).stdout)
    try:
        parsed: NcclTestsResult | None = parse_nccl_tests(output)
    except NcclTestsParseError as exc:
        parsed, no_table = None, str(exc)
    model = gpu_by_device_id(gpu.gpus_on_bus[0].device_id)
    name = (parsed.devices[0] if parsed and parsed.devices else None) or (
        model.name if model else ""
    )
    topology = host.run("nvidia-smi topo -m").stdout
    figure = figure_of(parsed, rc) if parsed is not None else None
    where: dict[str, Any] = {
        "gpu_model": name,
        "gpu_count": gpus,
        "interconnect": _interconnect(topology),
    }
    verdict = judge_nccl(figure, **where)
    if parsed is None and rc:
        # A run that crashed before its table: the exit code and the parser's words say why.
        verdict = Verdict(verdict.check, "fail", f"all_reduce_perf exited {rc}: {no_table}")
    # Where the workloads' all-reduce check reads it
    # (validation.verdicts.runstate.nccl_tests_busbw).
    run_state.vendor["nccl_tests"] = nccl_section(verdict, parsed=parsed, figure=figure, **where)
    _apply(verdict, record)


def _interconnect(topo_text: str) -> str:
    """The host's interconnect class from ``nvidia-smi topo -m``; an unreadable matrix gives
    "unknown (...)", for which no floor exists, so the figure is reported, not judged."""
    from gpufleet.parsers import parse_nvidia_smi_topo
    from gpufleet.parsers.topo import TopoParseError
    from validation.workloads._topology import classify

    try:
        return classify(parse_nvidia_smi_topo(topo_text)).name
    except (TopoParseError, ValueError) as exc:
        return f"unknown ({exc})"
