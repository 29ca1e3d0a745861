"""The README is the front door: one screen's worth of sections, and the test command CI runs.

Every inventory key and diagnose code is listed in the generated reference instead
(tests/unit/test_reference_docs.py)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
# Issue 37: the sections a newcomer looks for, in this order.
SECTIONS = (
    "Status",
    "What it does to your hosts, and what it never does",
    "Requirements",
    "Try it without GPUs: the sandbox",
    "Install on a control node",
    "A first real fleet, step by step",
    "Everyday commands",
    "The keys most people set",
    "Where results go",
    "When something fails",
    "Upgrading",
    "Documentation",
    "Development",
)


def test_the_readme_fits_in_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_every_section_is_there_in_order() -> None:
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert [h for h in headings if h in SECTIONS] == list(SECTIONS)


@pytest.mark.parametrize(
    "said",
    [
        "No TensorFlow GPU check has run on a real GPU yet",
        "report only",
        "openssh-server",
        "apt-cacher-ng",
        "chromium",
        "gpufleet sandbox down",
        '-m "not integration and not workload"',
        ".ci/run",
    ],
)
def test_the_front_door_says_it(said: str) -> None:
    assert said in README


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^phase tests (.+)$", ci, flags=re.MULTILINE)
    assert commands == ["scripts/test"], ".ci/run does not run the test command as its tests phase"
    assert re.search(r"^scripts/bootstrap && scripts/test\b", README, flags=re.MULTILINE), (
        "README's test command differs from what .ci/run runs"
    )
