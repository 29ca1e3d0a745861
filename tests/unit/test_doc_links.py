"""Every relative link in README.md and docs/**/*.md resolves: the file exists and, for a
`#anchor`, the page has a heading that GitHub turns into that anchor (issue 37); every path of
the tree and every module the pages name exists (issue 36 moved many)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PAGES = sorted(
    [REPO_ROOT / "README.md", REPO_ROOT / "SECURITY.md", *(REPO_ROOT / "docs").rglob("*.md")]
)
# [text](target) and ![alt](target), outside code spans and fenced blocks.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def broken(page: Path) -> list[str]:
    out = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            out.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            out.append(f"{target}: no heading #{fragment} in {resolved.name}")
    return out


def test_the_anchor_rule_matches_githubs() -> None:
    assert anchor("A first real fleet, step by step") == "a-first-real-fleet-step-by-step"
    assert anchor("`gpufleet validate`") == "gpufleet-validate"
    assert anchor("Try it without GPUs: the sandbox") == "try-it-without-gpus-the-sandbox"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[ok](#top) [gone](missing.md) [bad](#nowhere) `[code](x.md)`\n")
    assert broken(page) == ["missing.md: no such file", "#nowhere: no heading #nowhere in page.md"]


# A path of this tree: it starts at one of its top-level folders.
TOPS = sorted(p.name for p in REPO_ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))
TREE_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOPS)}|\.ci)/[\w./-]*[\w/])")
# A dotted module name of the two packages (a file name such as gpufleet.prom is not one).
MODULE = re.compile(r"(?<![\w./-])((?:gpufleet|validation)(?:\.\w+)+)")
FILE_SUFFIXES = {"md", "py", "prom", "yml", "yaml", "sh", "json", "toml", "txt", "html", "j2"}
# Files the pages tell an operator to make, and another project's paths.
NOT_OURS = ("inventories/mine.py", "inventories/fleet.py", "deploy/helm/")


def _names_a_file_to_make(path: str) -> bool:
    stem = Path(path).stem
    return path.startswith(NOT_OURS) or (stem.isupper() and len(stem) > 1)


def _module_exists(dotted: str, root: Path) -> bool:
    """``dotted`` is a module or package of the tree, or a name defined in one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:i])
        source = (
            base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        )
        if source.exists():
            rest = parts[i:]
            return (
                not rest or re.search(rf"\b{re.escape(rest[0])}\b", source.read_text()) is not None
            )
    return False


def missing_names(page: Path, root: Path = REPO_ROOT) -> list[str]:
    """The paths of the tree and the modules ``page`` names that do not exist."""
    text = page.read_text(encoding="utf-8")
    out = []
    for path in dict.fromkeys(TREE_PATH.findall(text)):
        if not _names_a_file_to_make(path) and not (root / path).exists():
            out.append(f"{path}: no such path")
    for dotted in dict.fromkeys(MODULE.findall(text)):
        last = dotted.rsplit(".", 1)[1]
        if last in FILE_SUFFIXES or last.isupper():  # a file name, or NAME: a placeholder
            continue
        if not _module_exists(dotted, root):
            out.append(f"{dotted}: no such module")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_a_moved_path_or_module_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "See `validation/thresholds.toml`, validation/verdicts/thresholds.toml,\n"
        "gpufleet.matrix.floors, gpufleet.floors.derived.floors_for,\n"
        "gpufleet.floors.derived.no_such_name, gpufleet.prom, validation.workloads.NAME and\n"
        "inventories/mine.py or gpufleet/sandbox/records/pci/NAME.txt.\n"
    )
    assert missing_names(page) == [
        "validation/thresholds.toml: no such path",
        "gpufleet.matrix.floors: no such module",
        "gpufleet.floors.derived.no_such_name: no such module",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_path_and_module_named_exists(page: Path) -> None:
    assert missing_names(page) == []


# Issue 37: docs/ in the four usual kinds, with the pages an operator looks for.
KINDS = {
    "howto": ("slurm", "air-gapped", "secure-boot", "rolling-upgrade", "calibration",
              "monitoring", "multi-node", "uninstall", "troubleshooting"),
    "reference": ("inventory-keys", "cli", "diagnose-codes", "checks", "metrics",
                  "files-and-ports", "exit-codes", "results"),
    "explanation": ("architecture", "verdicts", "deploy-stamps", "fleet-cache", "version-matrix"),
}  # fmt: skip


def test_docs_come_in_four_kinds() -> None:
    docs = REPO_ROOT / "docs"
    assert sorted(p.name for p in docs.glob("*.md")) == ["getting-started.md"]  # the tutorial
    assert sorted(p.name for p in docs.iterdir() if p.is_dir()) == sorted(KINDS)
    for kind, names in KINDS.items():
        assert [n for n in names if not (docs / kind / f"{n}.md").exists()] == [], kind


def test_the_readme_indexes_every_page() -> None:
    readme = REPO_ROOT / "README.md"
    indexed = {(REPO_ROOT / t.partition("#")[0]).resolve() for t in links(readme)}
    pages = [p for p in PAGES if p.parent != REPO_ROOT]
    assert [str(p.relative_to(REPO_ROOT)) for p in pages if p.resolve() not in indexed] == []


# The stages that write files on a host, and the constants naming them.
FILE_STAGES = ("host_config", "fleet_cache", "driver", "nvidia_repo", "monitoring", "scheduler",
               "python_env", "host_probe")  # fmt: skip
NOT_WRITTEN = {"/usr/bin/python3"}  # the interpreter the health check runs with


def test_the_files_page_names_every_file_the_stages_write() -> None:
    import importlib

    page = (REPO_ROOT / "docs" / "reference" / "files-and-ports.md").read_text(encoding="utf-8")
    missing = []
    for name in FILE_STAGES:
        module = importlib.import_module(f"gpufleet.stages.{name}")
        for key, value in vars(module).items():
            if not (key.isupper() and isinstance(value, str) and value.startswith("/")):
                continue
            if value not in NOT_WRITTEN and value.rstrip("/").rsplit("/", 1)[-1] not in page:
                missing.append(f"{name}.{key} = {value}")
    assert missing == []
