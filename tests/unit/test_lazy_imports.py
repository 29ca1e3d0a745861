"""Every import of gpufleet's and validation's own modules names a module and a name that exist.

Imports inside functions run only when the function does: after a layout move (issue 36 moved
validation/expectations.py to validation/verdicts/), `validate --dispatch jobs` died on one with
ModuleNotFoundError while every import-time test passed. This reads them all from the source.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("gpufleet", "validation")


def own_imports() -> list[tuple[str, int, str, str]]:
    """(file, line, module, name) of every ``from <ours> import name`` in the source."""
    found = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and node.module
                    and node.module.split(".")[0] in OURS
                ):
                    rel = str(path.relative_to(ROOT))
                    found += [(rel, node.lineno, node.module, a.name) for a in node.names]
    return found


IMPORTS = own_imports()


def test_the_walk_finds_the_function_level_imports():
    assert ("gpufleet/validate/slurm_dispatch.py", "validation.verdicts.expectations") in {
        (f, m) for f, _line, m, _name in IMPORTS
    }


@pytest.mark.parametrize("module", sorted({m for _f, _l, m, _n in IMPORTS}))
def test_every_imported_module_exists_and_has_its_names(module):
    where = [(f, line, name) for f, line, m, name in IMPORTS if m == module]
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        pytest.fail(f"{module} is imported at {where[:3]} but does not exist: {exc}")
    missing = []
    for file, line, name in where:
        if name == "*" or hasattr(loaded, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ModuleNotFoundError:
            missing.append(f"{file}:{line} imports {name}")
    assert not missing, f"{module} has no such name: {missing}"
