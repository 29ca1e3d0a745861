"""Jinja2 templates of the files the stages write on hosts, and the function rendering them."""

from __future__ import annotations

import json
import re
import shlex
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


def _comment(value: object) -> str:
    """A value inside a ``#`` comment line: no line break may end the comment early."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", str(value))


# Filters for values from the inventory: `sh` quotes one shell word, `comment` keeps a value
# inside its comment line, `yaml` makes one double-quoted YAML scalar (a JSON string is one).
_ENV.filters["sh"] = lambda value: shlex.quote(str(value))
_ENV.filters["yaml"] = lambda value: json.dumps(str(value))
_ENV.filters["comment"] = _comment


def render(name: str, **values: Any) -> str:
    """Render a template of this folder: ``render("nvidia-cuda.sources.j2", uri=..., ...)``."""
    return _ENV.get_template(name).render(**values)
