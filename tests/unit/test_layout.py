"""The layout's rules (issue 36): rooms of their own for the suite's parts and the floors, short
modules, a one-line docstring on each, and no module that only re-exports another's names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# Every folder of Python the project holds; scripts/ also has Python without a .py suffix.
ROOTS = ("gpufleet", "validation", "tests", "benchmarks", "scripts", "deploy", "inventories")
MAX_LINES = 400
# The package facades callers import from (architecture.md, "Public import paths").
FACADES = {
    "gpufleet/matrix/__init__.py",
    "gpufleet/parsers/__init__.py",
    "gpufleet/spec/__init__.py",
    "gpufleet/vendor/__init__.py",
    "gpufleet/sandbox/standins/__init__.py",
}


def python_files(root: Path = REPO_ROOT) -> list[Path]:
    """Every Python module under ``ROOTS``, scripts without a suffix included."""
    found = []
    for name in ROOTS:
        for path in sorted((root / name).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.suffix == ".py" or (
                not path.suffix and path.read_bytes()[:40].startswith(b"#!/usr/bin/env python")
            ):
                found.append(path)
    return found


def first_line(path: Path) -> str:
    """The first line of the module's docstring ("" when it has none)."""
    return (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").split("\n")[0]


def only_reexports(path: Path) -> bool:
    """The module's body is imports (and ``__all__``) only: a shim for names that live elsewhere."""
    body = [
        node
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
    ]
    return bool(body) and all(
        isinstance(node, (ast.Import, ast.ImportFrom))
        or (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
        )
        for node in body
    )


def test_the_suites_root_holds_its_pytest_files_and_at_most_six_others() -> None:
    root = REPO_ROOT / "validation"
    others = [
        p.name
        for p in root.glob("*.py")
        if not p.name.startswith("test_") and p.name != "conftest.py"
    ]
    assert len(others) <= 6, sorted(others)
    rooms = {p.parent.name for p in root.glob("*/__init__.py")}
    assert {"verdicts", "host", "periodic", "vendor", "workloads", "cluster"} <= rooms


def test_the_matrix_holds_versions_and_package_names_not_floors() -> None:
    words = ("floor", "reference", "calibrat", "speedup", "datasheet", "threshold")
    found = [
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "gpufleet" / "matrix").rglob("*.py")
        if any(w in p.stem for w in words)
    ]
    assert found == []
    imports_floors = [
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "gpufleet" / "matrix").rglob("*.py")
        if "gpufleet.floors" in p.read_text(encoding="utf-8")
    ]
    assert imports_floors == []


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO_ROOT)): n
        for p in python_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_every_module_and_room_says_in_its_first_line_what_it_holds() -> None:
    assert [str(p.relative_to(REPO_ROOT)) for p in python_files() if not first_line(p)] == []


def test_no_module_only_reexports_names_of_another() -> None:
    shims = [
        str(p.relative_to(REPO_ROOT))
        for p in python_files()
        if only_reexports(p) and str(p.relative_to(REPO_ROOT)) not in FACADES
    ]
    assert shims == []


@pytest.mark.parametrize(
    ("text", "shim"),
    [
        ('"""Moved."""\nfrom gpufleet.floors.derived import *  # noqa\n', True),
        ('"""Moved."""\nfrom a import b\n__all__ = ["b"]\n', True),
        ('"""Real."""\nfrom a import b\n\nC = b + 1\n', False),
        ('"""A room."""\n', False),
    ],
)
def test_a_shim_is_told_from_a_module(tmp_path: Path, text: str, shim: bool) -> None:
    path = tmp_path / "m.py"
    path.write_text(text)
    assert only_reexports(path) is shim


def test_the_walk_finds_suffixless_python_scripts_and_long_files(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "tool").write_text("#!/usr/bin/env python3\n" + "x = 1\n" * 401)
    (tmp_path / "scripts" / "shell").write_text("#!/usr/bin/env bash\necho\n")
    found = python_files(tmp_path)
    assert [p.name for p in found] == ["tool"]
    assert len(found[0].read_text().splitlines()) > MAX_LINES and first_line(found[0]) == ""
