"""docs/reference/checks.md: every check of each tier, and every floor with its value and source."""

from __future__ import annotations

import ast
from pathlib import Path

# Every floor table is imported here and nowhere else in gpufleet.reference, so a move of
# those modules touches one import block.
from gpufleet.floors.derived import INTERCONNECTS, floors_for
from gpufleet.floors.nccl import FLOORS as NCCL_FLOORS
from gpufleet.floors.nccl_cluster import FABRIC_FRACTION, PUBLISHED_MARGIN, PUBLISHED_RUNS
from gpufleet.reference.markdown import page, table
from gpufleet.report.origins import origin_kind as report_origin_kind
from gpufleet.validate.checks import list_checks

REPO = Path(__file__).resolve().parents[2]
TIERS = ("quick", "full")
# The kinds of host the floor tables below are shown for: the common data-centre boards, one
# of each interconnect class. `gpufleet thresholds` prints any other kind.
KINDS = (
    ("Tesla V100-SXM2-32GB", 8, "nvlink_partial"),
    ("NVIDIA A100-SXM4-80GB", 8, "nvswitch"),
    ("NVIDIA H100 80GB HBM3", 8, "nvswitch"),
    ("NVIDIA H200", 8, "nvswitch"),
    ("NVIDIA B200", 8, "nvswitch"),
    ("NVIDIA L40S", 8, "cross_socket"),
    ("NVIDIA A10", 4, "pcie_host_bridge"),
    ("Tesla T4", 2, "pcie_host_bridge"),
    ("NVIDIA L4", 1, "single_gpu"),
)


def _workload_line(name: str) -> str:
    path = REPO / "validation" / "workloads" / f"{name}.py"
    if not path.exists():
        return ""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.split("\n\n", 1)[0]


def _test_lines(group: str) -> dict[str, str]:
    """Check name -> the first line of its test function's docstring in validation/test_GROUP.py."""
    path = REPO / "validation" / f"test_{group}.py"
    if not path.exists():
        return {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name.removeprefix("test_"): (ast.get_docstring(node) or "").split("\n", 1)[0]
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def check_rows() -> list[list[str]]:
    """One row per check name: the tiers that run it and what it measures."""
    tiers = {tier: list_checks(tier) for tier in TIERS}
    names = list(dict.fromkeys(n for tier in TIERS for n in tiers[tier]))
    lines: dict[str, dict[str, str]] = {}
    rows = []
    for name in names:
        group, check = name.split("::", 1)
        if group == "workloads":
            what = _workload_line(check)
        else:
            what = lines.setdefault(group, _test_lines(group)).get(check, "")
        rows.append([f"`{name}`", ", ".join(t for t in TIERS if name in tiers[t]), what])
    return rows


def origin_kind(origin: str, value: float | None) -> str:
    """How a floor was set, as the report names it; "report only" where no value is set."""
    kind = report_origin_kind(origin, value)
    return "report only" if kind == "none" else kind


def _bound(bound: str) -> str:
    return ">=" if bound == "min" else "<="


def kind_table(model: str, count: int, interconnect: str) -> str:
    """Every floor of one kind of host: value, how it was set, and where it comes from."""
    rows = []
    for floor in floors_for(model, count, interconnect):
        value = (
            "-" if floor.value is None else f"{_bound(floor.bound)} {floor.value:g} {floor.unit}"
        )
        per = " per GPU" if floor.per_gpu else ""
        source = floor.source or floor.origin
        if floor.source and not floor.origin.startswith("published"):  # derived: say how
            source = f"{floor.origin}; {floor.source}"
        rows.append([f"`{floor.name}`{per}", value, origin_kind(floor.origin, floor.value), source])
    head = f"### {count}x {model} ({interconnect})"
    return head + "\n\n" + table(["floor", "value", "set by", "source or reason"], rows)


def summary() -> str:
    """Floor name x kind of host: how each floor is set ("published", "choice", "report only")."""
    kinds = {f"{c}x {m.removeprefix('NVIDIA ').removeprefix('Tesla ')}": floors_for(m, c, i)
             for m, c, i in KINDS}  # fmt: skip
    names = list(dict.fromkeys(f.name for floors in kinds.values() for f in floors))
    rows = []
    for name in names:
        cells = []
        for floors in kinds.values():
            found = next((f for f in floors if f.name == name), None)
            cells.append("n/a" if found is None else origin_kind(found.origin, found.value))
        rows.append([f"`{name}`", *cells])
    return table(["floor", *kinds], rows)


def nccl_table() -> str:
    """The single- and multi-node nccl-tests floors, each with its source."""
    rows = [
        [
            f"{f.gpu_count}x {f.gpu_model}",
            f.interconnect,
            f"{f.busbw_gbps:g}",
            "busbw at the largest size" if f.metric == "largest" else "max busbw",
            "enforced" if f.enforced else "advisory (below: warn)",
            f.source + (f"; {f.note}" if f.note else ""),
        ]
        for f in NCCL_FLOORS
    ]
    head = ["GPUs", "interconnect", "floor GB/s", "compared with", "kind", "source"]
    return table(head, rows)


def cluster_table() -> str:
    """The cross-host runs the cluster tier's published floors come from."""
    rows = [
        [
            f"{r.platform} ({r.hosts} hosts of {r.gpus_per_host}x {r.gpu_model})",
            r.network,
            f"{PUBLISHED_MARGIN} x {r.busbw_gbps:g} = {PUBLISHED_MARGIN * r.busbw_gbps:.1f}",
            r.source,
        ]
        for r in PUBLISHED_RUNS
    ]
    return table(["run", "network", "floor GB/s", "source"], rows)


INTRO = """\
What `gpufleet validate` runs, tier by tier, and every floor a figure is held to. A floor is
"published" (a figure someone published, times a stated margin), gpufleet's "choice" (the
reason is given), "derived" (from another floor, e.g. TFLOP/s from a fraction of the datasheet
peak) or "report only" (no public figure: the value is recorded and judged by nothing until a
calibration file sets a floor, see [../howto/calibration.md](../howto/calibration.md)). How the
margins were chosen: [floors.md](floors.md). `gpufleet thresholds --gpu-model M --gpu-count N
--interconnect CLASS` prints the same for any kind of host."""


def render() -> str:
    classes = table(["class", "meaning"], [[f"`{k}`", v] for k, v in INTERCONNECTS.items()])
    sections = [
        "## Checks\n\n" + table(["check", "tiers", "what it measures"], check_rows()),
        "## Interconnect classes\n\n" + classes,
        "## How each floor is set, by kind of host\n\n" + summary(),
        "## Floors by kind of host\n\n" + "\n\n".join(kind_table(*k) for k in KINDS),
        "## nccl-tests floors (`vendor_diagnostics::nccl_allreduce`)\n\n"
        "Where no floor is known the figure is recorded with status `no_floor`, never passed.\n\n"
        + nccl_table(),
        "## Cluster tier nccl-tests floors\n\n"
        f"Every cross-host run is held to {FABRIC_FRACTION} x the declared fabric "
        "(`nccl_fabric_gbps`, else `interconnect_gbps`) / 8 GB/s; where a published run of "
        "the same kind exists, also to:\n\n" + cluster_table(),
    ]
    return page("Checks and floors", INTRO, *sections)
