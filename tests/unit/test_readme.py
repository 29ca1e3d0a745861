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


def test_the_soft_fail_the_readme_names_is_unprovens_code() -> None:
    from gpufleet.validate.results import EXIT_STATUS

    said = re.findall(r"`validate`'s (\d)[^.]*soft fail", README)
    assert said == [str(EXIT_STATUS["unproven"])]


def codes_by_command(page: str) -> dict[str, set[int]]:
    """exit-codes.md's per-subcommand table: each command's codes with a meaning."""
    out = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"`\w+`", cells[0]):
            out[cells[0].strip("`")] = {code for code, cell in enumerate(cells[1:]) if cell}
    return out


def test_the_commands_table_uses_the_codes_of_the_exit_codes_page() -> None:
    page = (REPO_ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    expected = codes_by_command(page)
    assert expected["validate"] == {0, 1, 2, 3, 4} and expected["drift"] == {0, 1, 2, 3}
    shown = {
        command: {int(c) for c in re.findall(r"\b([0-4])\b", cell)}
        for command, cell in re.findall(
            r"^\| `gpufleet (\w+)[^|]*\|[^|]*\| ([^|]+) \|", README.replace("\\|", "/"), re.M
        )
    }
    assert set(shown) == set(expected)
    assert {c: codes for c, codes in shown.items() if codes != expected[c]} == {}
