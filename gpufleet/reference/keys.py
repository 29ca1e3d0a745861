"""docs/reference/inventory-keys.md: every key, its type, default, values, unit and readers."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

from gpufleet.reference.key_notes import NOTES
from gpufleet.reference.markdown import page, table
from gpufleet.spec import FIELDS, KEY_DOCS, NodeSpec, defaults
from gpufleet.spec.checks import type_name

REPO = Path(__file__).resolve().parents[2]
# Units by the key's name ending; a few keys whose name does not say it are listed by name.
_SUFFIX_UNITS = (("_gbps", "Gbit/s"), ("_gib", "GiB"), ("_bytes", "bytes (K, M, G suffixes)"))
_NAMED_UNITS = {
    "reboot_timeout_s": "seconds",
    "slurm_health_interval": "seconds",
    "periodic_schedule": "systemd OnCalendar= expression",
    "dcgm_diag_level": "DCGM level 1-4",
}
# Where a read happens -> who reads it. Coarse on purpose: a module moving inside its package
# does not change the page.
_PLACES = (
    ("gpufleet/cache/", "fleet cache"),
    ("gpufleet/stamp/", "deploy stamps"),
    ("gpufleet/cluster/", "validate --tier cluster"),
    ("gpufleet/validate/", "gpufleet validate"),
    ("gpufleet/rollout/", "gpufleet rollout"),
    ("gpufleet/commands/rollout", "gpufleet rollout"),
    ("gpufleet/drift/", "gpufleet drift"),
    ("gpufleet/scheduler/", "Slurm integration"),
    ("gpufleet/matrix/", "gpufleet thresholds"),
    ("gpufleet/commands/thresholds", "gpufleet thresholds"),
    ("gpufleet/report/", "gpufleet report"),
    ("gpufleet/operations/", "deploy"),
    ("deploy/", "deploy"),
    ("validation/", "on-host suite"),
)
_NOT_STAGES = {"__init__", "node", "op_keys", "host_probe", "inventory_error"}


def unit(key: str) -> str:
    """The unit a key's value is in, or "" where it has none."""
    if key in _NAMED_UNITS:
        return _NAMED_UNITS[key]
    return next((u for suffix, u in _SUFFIX_UNITS if key.endswith(suffix)), "")


def _default(key: str) -> str:
    if key == "miniforge_sha256":
        return "per architecture, pinned (gpufleet/spec/defaults.py)"
    value = defaults()[key]
    return "unset" if value is None else f"`{value!r}`"


def _place(path: str) -> str | None:
    if path.startswith("gpufleet/stages/"):
        stem = Path(path).stem
        return "deploy" if stem in _NOT_STAGES else f"stage {stem}"
    return next((who for prefix, who in _PLACES if path.startswith(prefix)), None)


def _properties() -> dict[str, set[str]]:
    """NodeSpec property -> the keys it reads (``self.key``), so a read through it counts."""
    tree = ast.parse((REPO / "gpufleet" / "spec" / "model.py").read_text(encoding="utf-8"))
    uses: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in FIELDS:
            uses[node.name] = {
                a.attr
                for a in ast.walk(node)
                if isinstance(a, ast.Attribute)
                and isinstance(a.value, ast.Name)
                and a.value.id == "self"
            }
    changed = True
    while changed:  # a method over another method reads that one's keys too
        changed = False
        for used in uses.values():
            more = set().union(*(uses.get(name, set()) for name in used)) - used
            if more:
                used |= more
                changed = True
    return {name: used & set(FIELDS) for name, used in uses.items() if used & set(FIELDS)}


def readers() -> dict[str, list[str]]:
    """Key -> who reads it: ``spec.key`` (or a NodeSpec property over it) or ``data.get("key")``
    in the code, and the key's name as a string in the on-host suite (it reads the
    expectations file)."""
    props = _properties()
    names = sorted(set(FIELDS) | set(props))
    alternatives = "|".join(names)
    access = re.compile(
        rf"\b(?:spec|upstream)\.({alternatives})\b"  # a NodeSpec's attribute or property
        rf"|(?:\bdata|\bmerged|}})(?:\.get\(|\[)[\"']({alternatives})[\"']"  # the raw host data
    )
    seen: dict[str, set[str]] = {key: set() for key in FIELDS}
    for folder in ("gpufleet", "validation", "deploy"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            who = _place(rel)
            if who is None:
                continue
            text = path.read_text(encoding="utf-8")
            for name in {a or b for a, b in access.findall(text)}:
                for key in props.get(name, {name}) & set(FIELDS):
                    seen[key].add(who)
            if who == "on-host suite":
                for key in FIELDS:
                    if f'"{key}"' in text:
                        seen[key].add(who)
    return {key: sorted(found) for key, found in seen.items()}


def rows() -> list[list[str]]:
    """One row per key, in NodeSpec's order."""
    hints = typing.get_type_hints(NodeSpec)
    who = readers()
    out = []
    for key, field in FIELDS.items():
        choices = field.metadata["choices"]
        secret = " (secret: kept off command lines and output)" if field.metadata["secret"] else ""
        doc = NOTES.get(key, KEY_DOCS[key]) + secret
        out.append(
            [
                f"`{key}`",
                type_name(hints[key]),
                _default(key),
                ", ".join(f"`{c}`" for c in choices),
                unit(key),
                doc,
                ", ".join(who[key]),
            ]
        )
    return out


INTRO = """\
Every key a host, a group (`inventories/group_data/<group>.py`) or the whole inventory may set.
The defaults live in `gpufleet/spec/model.py`. An unknown key stops the run before any host is
touched, with a "did you mean"; pyinfra's own keys (`ssh_*`, `_sudo`, ...) pass through, and
keys of your own must start with `x_`. Impossible combinations (a TensorFlow release with no
matrix entry, a driver branch the GPUs cannot use) stop the run with a message naming both
sides and the fix. "Read by" is found in the code: the deploy stages, the commands run on the
control node, and the on-host suite (through `/etc/gpufleet/expectations.json`)."""


def render() -> str:
    head = ["key", "type", "default", "allowed values", "unit", "meaning", "read by"]
    return page("Inventory keys", INTRO, table(head, rows()))
