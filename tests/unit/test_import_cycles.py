"""No import cycle among the project's modules (gpufleet, validation, tests, benchmarks, the
deploy and inventories), lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gpufleet", "validation", "tests", "benchmarks", "deploy", "inventories")


def _modules() -> dict[str, Path]:
    """Every module of the packages by its dotted name (a package by its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: never imported when the code runs."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` is, or the one it is an attribute of."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports, at any depth of its code."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skipped = _type_checking_only(tree)
        targets: list[str] = []
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, *([base] if base else [])])
                targets += [f"{base}.{alias.name}" for alias in node.names]
        if not (path.parent / "__init__.py").exists():
            # A script folder (benchmarks/): its scripts import each other by bare name.
            folder = name.rpartition(".")[0]
            targets += [
                f"{folder}.{t}" for t in targets if f"{folder}.{t.split('.')[0]}" in modules
            ]
        owners = {_owner(target, modules) for target in targets}
        graph[name] = {owner for owner in owners if owner and owner != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_scripts_importing_each_other_by_bare_name_are_seen(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("from a import x\n")
    graph = import_graph({"bench.a": tmp_path / "a.py", "bench.b": tmp_path / "b.py"})
    assert cycles(graph) == [["bench.a", "bench.b"]]


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    modules = _modules()
    assert "validation.periodic.runner" in modules and "gpufleet.floors.derived" in modules
    assert "benchmarks.drift" in modules and "tests.unit.fake_fleet" in modules
    assert cycles(import_graph(modules)) == []
