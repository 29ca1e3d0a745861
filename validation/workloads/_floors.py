"""The floors this host's figures face: gpufleet.floors.derived for its kind, calibrated or not.

The kind of host is its GPU model (as TensorFlow/NVML name it), how many GPUs the workload
uses and their interconnect class (``nvidia-smi topo -m``). The floors are the ones
``gpufleet thresholds`` prints for that kind, with a calibration file's floors where the
inventory names one (``--calibration``). Every floor a workload asks for is written to the
document's ``config["floors"]`` with its value, unit and origin, so the report can say which
came from a published figure, which from calibration and which are gpufleet's choice.

Example (in a workload body)::

    floor = run.floor("resnet50.images_per_s.amp")
    if floor is not None and floor.value is not None:
        run.sample_check("throughput_amp", "resnet50.images_per_s.amp", per_gpu_values,
                         threshold=floor.value, what="images/s per GPU")
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpufleet.compat import zip_strict
from gpufleet.floors import calibration as cal
from gpufleet.floors.datasheets import below_expected
from gpufleet.floors.derived import Floor, FloorError, floors_for
from validation.json_argument import json_object
from validation.workloads._run import NO_GPU, Run, WorkloadError
from validation.workloads._topology import host_topology


def read_calibration(text: str | None) -> dict[str, Any] | None:
    """``--calibration``: a calibration document as JSON (what the runner hands over from the
    inventory's TOML file), or @FILE holding one; None without the option."""
    return json_object(text, "--calibration", WorkloadError)


def host_kind(run: Run) -> tuple[str, int, str] | str:
    """(GPU model, GPU count, interconnect class) of the GPUs this workload uses, or why the
    host has no kind floors can be looked up for."""
    if not run.has_gpu:
        return NO_GPU
    if not run.gpu_model:
        return "TensorFlow and NVML name no GPU model"
    count = len(run.gpus)
    if count == 1:
        return run.gpu_model, 1, "single_gpu"
    topology = run.config.get("topology")
    if not isinstance(topology, dict):
        topology = host_topology(True).to_dict()
        run.config["topology"] = topology
    # GpuTopology.to_dict() calls the class "class"; a hand-made {"name": ...} works as well.
    name = str(topology.get("class") or topology.get("name"))
    if name in ("unknown", "no_gpu"):
        return f"interconnect not known ({topology.get('reason')})"
    # Review 2 N14: a board whose NVLinks are down reads as PCIe (a DGX-1V as cross_socket,
    # floor 3 GB/s); the board's own class sets the floors, so the fallback fails them.
    expected = below_expected(run.gpu_model, count, name)
    if expected is not None:
        run.config["topology_expected"] = {
            "class": expected,
            "measured": name,
            "reason": f"{count} x {run.gpu_model} is an NVLink board ({expected}); "
            f"nvidia-smi topo -m shows {name}: NVLinks down",
        }
        return run.gpu_model, count, expected
    return run.gpu_model, count, name


def load_floors(run: Run, calibration: dict[str, Any] | None) -> None:
    """Fill ``run.floors`` for this host (empty, with ``run.floors_reason``, when it has none)."""
    kind = host_kind(run)
    spreads_only = bool(calibration and calibration.get("spreads_only"))
    if kind == NO_GPU and calibration is not None and not spreads_only:
        _load_cpu_calibration(run, calibration)
        return
    if isinstance(kind, str):
        run.floors, run.floors_reason = {}, kind
        return
    model, count, interconnect = kind
    try:
        floors = floors_for(model, count, interconnect)
        if calibration is not None:
            parsed = cal.parse(calibration, str(calibration.get("path", "--calibration")))
            applied = cal.apply(floors, parsed, model, count, interconnect)
            # The quick tier (spreads_only): the calibrated spreads, never the full tier's floors.
            floors = (
                [
                    replace(f, between_run_sd=a.between_run_sd, spread_source=a.spread_source)
                    for f, a in zip_strict(floors, applied)
                ]
                if spreads_only
                else applied
            )
    except FloorError as exc:
        # An unknown model is not a failure of the host: the figures are reported unjudged
        # by published floors, and calibration is the way to give them one. A calibration
        # file for another kind of host is an operator error: say it in every check.
        if calibration is not None:
            raise WorkloadError(str(exc)) from None
        run.floors, run.floors_reason = {}, str(exc)
        return
    run.floors = {f.name: f for f in floors}
    run.floors_reason = None
    run.config["host_kind"] = {"gpu_model": model, "gpu_count": count, "interconnect": interconnect}


def _load_cpu_calibration(run: Run, calibration: dict[str, Any]) -> None:
    """A GPU-less host given a calibration: a CPU one (gpu_model "cpu") gives this workload's
    figures their floors, each recorded in config["floors"] (the report shows their origin;
    speed verdicts stay not applicable without a GPU). A GPU host's file is not applied here."""
    try:
        parsed = cal.parse(calibration, str(calibration.get("path", "--calibration")))
        floors = cal.apply([], parsed, cal.CPU_MODEL, cal.CPU_COUNT, cal.CPU_INTERCONNECT)
    except FloorError as exc:
        if "calibrates" not in str(exc):
            raise WorkloadError(str(exc)) from None
        run.floors, run.floors_reason = {}, f"{NO_GPU} ({exc})"
        return
    run.floors = {f.name: f for f in floors}
    run.floors_reason = None
    run.config["host_kind"] = {
        "gpu_model": cal.CPU_MODEL,
        "gpu_count": cal.CPU_COUNT,
        "interconnect": cal.CPU_INTERCONNECT,
    }
    for name in run.floors:
        if name.startswith(f"{run.workload}."):
            run.floor(name)


def floor_evidence(floor: Floor) -> dict[str, Any]:
    """How a floor appears in the document: value, unit, bound and where it comes from."""
    return {"value": floor.value, "unit": floor.unit, "bound": floor.bound, "origin": floor.origin}
