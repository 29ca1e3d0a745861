"""Jinja2 templates of the files the stages write on hosts, and the function rendering them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

TEMPLATE_DIR = Path(__file__).parent

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)


def render(name: str, **values: Any) -> str:
    """Render a template of this folder: ``render("nvidia-cuda.sources.j2", uri=..., ...)``."""
    return _ENV.get_template(name).render(**values)
