"""docs/reference/ is generated from the code (python -m gpufleet.reference): each page is up to
date, and lists every key, command, flag, code, check, floor and metric the code has."""

from __future__ import annotations

import pytest

from gpufleet import reference, spec
from gpufleet.parsers.diagnosis import DIAGNOSIS_CODES, codes_markdown
from gpufleet.reference import checks, cli, keys
from gpufleet.validate.checks import list_checks
from tests.conftest import REPO_ROOT
from tests.unit.test_metric_names import written_names

DOCS = REPO_ROOT / "docs" / "reference"
PAGES = reference.render_all()


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_is_what_the_code_makes_today(name: str) -> None:
    assert (DOCS / name).exists(), f"docs/reference/{name} missing: python -m gpufleet.reference"
    assert page(name) == PAGES[name], (
        f"docs/reference/{name} is stale: python -m gpufleet.reference"
    )


def test_stale_names_a_page_that_differs(tmp_path) -> None:
    reference.write(tmp_path)
    assert reference.stale(tmp_path) == []
    (tmp_path / "cli.md").write_text("# old\n")
    (tmp_path / "metrics.md").unlink()
    assert reference.stale(tmp_path) == ["cli.md", "metrics.md"]


@pytest.mark.parametrize("key", sorted(spec.KEY_DOCS))
def test_every_inventory_key_is_documented(key: str) -> None:
    assert f"| `{key}` |" in page("inventory-keys.md"), f"inventory key {key!r} missing"


def test_every_key_names_who_reads_it() -> None:
    # The scan finds readers for every key; a key nothing reads would be dead.
    assert [key for key, who in keys.readers().items() if not who] == []


def test_units_follow_the_key_names() -> None:
    assert keys.unit("interconnect_gbps") == "Gbit/s"
    assert keys.unit("min_free_disk_gib") == "GiB"
    assert keys.unit("reboot_timeout_s") == "seconds"
    assert keys.unit("tf_version") == ""


@pytest.mark.parametrize("code", sorted(DIAGNOSIS_CODES))
def test_every_diagnosis_code_is_documented(code: str) -> None:
    assert f"| `{code}` |" in page("diagnose-codes.md"), f"diagnosis code {code!r} missing"


def test_the_code_table_is_the_diagnose_table() -> None:
    assert codes_markdown() in page("diagnose-codes.md")


def test_every_command_and_flag_is_documented() -> None:
    text = page("cli.md")
    parsers = cli.commands()
    assert set(parsers) == {"validate", "drift", "rollout", "report", "sandbox", "diagnose",
                            "matrix", "thresholds"}  # fmt: skip
    for name, parser in parsers.items():
        assert f"## `gpufleet {name}`" in text, name
        for sub in [parser, *cli.subparsers(parser).values()]:
            for action in sub._actions:
                if action.help == "==SUPPRESS==" or "--help" in action.option_strings:
                    continue
                for option in action.option_strings:
                    assert f"`{option}`" in text, (name, option)
    assert "### `gpufleet sandbox up`" in text


def test_hidden_flags_stay_hidden() -> None:
    assert "--cluster-steps" not in page("cli.md")


def test_every_check_and_floor_is_documented() -> None:
    text = page("checks.md")
    for tier in checks.TIERS:
        for name in list_checks(tier):
            assert f"| `{name}` |" in text, name
    for kind in checks.KINDS:
        for floor in checks.floors_for(*kind):
            assert f"`{floor.name}`" in text, (kind, floor.name)
    for floor in checks.NCCL_FLOORS:
        assert floor.source in text


def test_every_check_says_what_it_measures() -> None:
    # A check row without a line (its test function has no docstring) reads "-" on the page.
    assert [row[0] for row in checks.check_rows() if not row[2].strip()] == []


def test_origin_kinds() -> None:
    assert checks.origin_kind("published (DLE ...) x 0.8", 1.0) == "published"
    assert checks.origin_kind("gpufleet's choice (why)", 0.7) == "choice"
    assert checks.origin_kind("no published figure", None) == "report only"


def test_every_metric_written_is_documented() -> None:
    text = page("metrics.md")
    names = written_names() | {"gpufleet_rollout_hosts"}
    assert [n for n in sorted(names) if f"| `{n}` |" not in text] == []


def test_every_note_is_of_a_key_and_shown() -> None:
    from gpufleet.reference.key_notes import NOTES

    assert set(NOTES) <= set(spec.KEY_DOCS)
    assert all(note in page("inventory-keys.md") for note in NOTES.values())
