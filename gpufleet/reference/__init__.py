"""The reference pages under docs/reference/, generated from the code's own tables.

``python -m gpufleet.reference`` writes them; ``stale()`` names those that differ from the code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


def _pages() -> dict[str, Callable[[], str]]:
    # Imported here: `gpufleet.reference` itself stays cheap to import.
    from gpufleet.reference import checks, cli, codes, keys, metrics

    return {
        "inventory-keys.md": keys.render,
        "cli.md": cli.render,
        "diagnose-codes.md": codes.render,
        "checks.md": checks.render,
        "metrics.md": metrics.render,
    }


def render_all() -> dict[str, str]:
    """File name under docs/reference/ -> its text, as the code makes it today."""
    return {name: render() for name, render in _pages().items()}


def stale(folder: Path = DOCS) -> list[str]:
    """The generated pages in ``folder`` that are missing or differ from the code."""
    out = []
    for name, text in render_all().items():
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out


def write(folder: Path = DOCS) -> list[Path]:
    """Write every generated page into ``folder``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
