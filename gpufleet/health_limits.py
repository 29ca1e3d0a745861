"""A GPU's PCIe link, power limit and clocks against its datasheet and its own defaults."""

from __future__ import annotations

from typing import Any

from gpufleet.floors.datasheets import datasheet
from gpufleet.health_base import Finding, field_of, gpus_of, label


def check_pcie_datasheet(smi: Any) -> list[Finding]:
    """Under load, a link below the datasheet's generation or x16 fails (review 2 N12).

    ``max_link_*`` is the lower of the card's and the slot's capability, so a Gen4 card in a
    slot, riser or BIOS setting limited to Gen3 or x8 runs "at its maximum" and passes the
    pcie_link check; the datasheet is what the card should reach."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        row = datasheet(field_of(gpu, "name"))
        gen, width = field_of(gpu, "pcie_gen_current"), field_of(gpu, "pcie_width_current")
        if row is None:
            continue
        short = []
        if row.pcie_gen is not None and gen is not None and int(gen) < row.pcie_gen:
            short.append(f"gen {gen} where the datasheet gives gen {row.pcie_gen}")
        if width is not None and int(width) < row.pcie_width:
            short.append(f"x{width} where the datasheet gives x{row.pcie_width}")
        if not short:
            continue
        capped = [
            f"{what} {field_of(gpu, f'pcie_{what}_max')}"
            for what in ("gen", "width")
            if field_of(gpu, f"pcie_{what}_max") is not None
        ]
        findings.append(
            Finding(
                "pcie_datasheet",
                "fail",
                f"{label(index, gpu)}: PCIe link under load at {' and '.join(short)} (link "
                f"maximum {', '.join(capped) or 'unknown'}: the slot, riser or BIOS may cap it)",
                gpu=str(index),
                figures={
                    "pcie_gen_current": gen,
                    "pcie_width_current": width,
                    "datasheet_gen": row.pcie_gen,
                    "datasheet_width": row.pcie_width,
                    "source": row.source,
                },
            )
        )
    return findings


def _lowered(gpu: Any) -> list[str]:
    row = datasheet(field_of(gpu, "name"))
    limit, default = field_of(gpu, "power_limit_w"), field_of(gpu, "default_power_limit_w")
    app, app_default = (
        field_of(gpu, "applications_clock_mhz"),
        field_of(gpu, "default_applications_clock_mhz"),
    )
    top = field_of(gpu, "max_sm_clock_mhz")
    said = []
    if limit is not None and default is not None and float(limit) < float(default):
        said.append(f"power limit {limit:g} W below the board's default {default:g} W")
    power = row.power_w if row is not None else None
    if power is not None and limit is not None and float(limit) < power:
        said.append(f"power limit {limit:g} W below the datasheet's {power:g} W")
    if app is not None and app_default is not None and int(app) < int(app_default):
        said.append(f"applications clock {app} MHz below its default {app_default} MHz")
    boost = row.boost_mhz if row is not None else None
    if boost is not None and top is not None and int(top) < boost:
        said.append(f"maximum SM clock {top} MHz below the datasheet's {boost} MHz")
    return said


def check_power_and_clocks(smi: Any) -> list[Finding]:
    """A power limit or clock set below its default or the datasheet fails (review 2 N16).

    Under load such a GPU shows only sw_power_cap or applications_clocks_setting, reasons
    the clock check treats as normal, so without this an admin's `nvidia-smi -pl` or `-ac`
    passes health silently and only the GEMM floors notice."""
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        said = _lowered(gpu)
        if said:
            row = datasheet(field_of(gpu, "name"))
            findings.append(
                Finding(
                    "power_clocks",
                    "fail",
                    f"{label(index, gpu)}: {'; '.join(said)}; restore them "
                    "(nvidia-smi -pl with the default, nvidia-smi -rac)",
                    gpu=str(index),
                    figures={
                        key: field_of(gpu, key)
                        for key in (
                            "power_limit_w",
                            "default_power_limit_w",
                            "applications_clock_mhz",
                            "default_applications_clock_mhz",
                            "max_sm_clock_mhz",
                        )
                    }
                    | {"source": row.source if row else None},
                )
            )
    return findings
