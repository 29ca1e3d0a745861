"""The on-host payload runs on Python 3.9 too (Ubuntu 20.04's python3.9 venv, conda 3.9).

What a host imports from validation/ (its test modules and conftest run on the control node)
and, through it, from gpufleet/ must parse as Python 3.9 and avoid the two 3.10 idioms that fail
there only when they run: ``isinstance(x, A | B)`` and ``zip(..., strict=...)``. Python 3.9
itself ran the quick workloads against TensorFlow 2.20 (tests/integration/test_os_matrix_e2e.py
does on a focal host).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpufleet.compat import zip_strict

ROOT = Path(__file__).resolve().parents[2]
OURS = ("validation", "gpufleet")


def _module_file(name: str) -> Path | None:
    for candidate in (ROOT / f"{name.replace('.', '/')}.py", ROOT / name.replace(".", "/")):
        if candidate.suffix == ".py" and candidate.is_file():
            return candidate
        if (candidate / "__init__.py").is_file():
            return candidate / "__init__.py"
    return None


def _imports(name: str, path: Path, tree: ast.Module) -> list[str]:
    found: list[str] = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [n for n in found if n.split(".")[0] in OURS]


def host_modules() -> dict[str, Path]:
    """The payload's modules a host can import: validation's own, and what they import."""
    start = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "validation").rglob("*.py")
        if not p.name.startswith("test_") and p.name != "conftest.py"
    ]
    seen: dict[str, Path] = {}
    todo = [name.removesuffix(".__init__") for name in start]
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        todo += _imports(name, path, ast.parse(path.read_text()))
    return seen


def py310_only(path: Path) -> list[str]:
    """Lines of ``path`` that fail on Python 3.9."""
    source = path.read_text()
    try:
        tree = ast.parse(source, feature_version=(3, 9))
    except SyntaxError as exc:
        return [f"{path.name}:{exc.lineno}: syntax Python 3.9 cannot parse"]
    found = []
    annotations = {
        id(n) for node in ast.walk(tree) for a in _annotations_of(node) for n in ast.walk(a)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitOr)
            and id(node) not in annotations
            and any(_is_type(side) for side in (node.left, node.right))
        ):
            found.append(f"{path.name}:{node.lineno}: a type union A | B evaluated at run time")
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id == "isinstance" and isinstance(node.args[-1], ast.BinOp):
            found.append(f"{path.name}:{node.lineno}: isinstance(x, A | B)")
        if node.func.id == "zip" and any(k.arg == "strict" for k in node.keywords):
            found.append(f"{path.name}:{node.lineno}: zip(..., strict=...)")
    return found


# Builtin types whose `|` builds a types.UnionType (Python 3.10+); annotations are strings
# under `from __future__ import annotations`, so only unions evaluated at run time fail.
_TYPE_NAMES = {"int", "float", "str", "bytes", "bool", "list", "dict", "tuple", "set", "type"}


def _is_type(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in _TYPE_NAMES) or (
        isinstance(node, ast.Constant) and node.value is None
    )


def _annotations_of(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return [node.returns]
    return []


def test_the_hosts_modules_are_found() -> None:
    modules = host_modules()
    assert {
        "validation.periodic.runner",
        "validation.workloads.xla",
        "gpufleet.parsers.topo",
    } <= set(modules)


def test_nothing_a_host_imports_needs_python_3_10() -> None:
    problems = [line for path in host_modules().values() for line in py310_only(path)]
    assert problems == [], "use gpufleet.compat.zip_strict and isinstance(x, (A, B))"


def test_the_check_catches_both_idioms(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "isinstance(1, int | float)\nlist(zip([1], [2], strict=True))\nNumber = int | float\n"
        "def f(x: int | None) -> str | None: ...\nflags = 1 | 2\n"
    )
    assert sorted(py310_only(sample)) == [
        "sample.py:1: a type union A | B evaluated at run time",
        "sample.py:1: isinstance(x, A | B)",
        "sample.py:2: zip(..., strict=...)",
        "sample.py:3: a type union A | B evaluated at run time",
    ]


def test_zip_strict_pairs_equal_lengths_and_refuses_others() -> None:
    assert list(zip_strict([1, 2], "ab", iter((True, False)))) == [
        (1, "a", True),
        (2, "b", False),
    ]
    with pytest.raises(ValueError, match="lengths differ"):
        list(zip_strict([1, 2], [1]))
