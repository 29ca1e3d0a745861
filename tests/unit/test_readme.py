"""The README is the front door: it must document every inventory key and every diagnosis code."""

from __future__ import annotations

import re

import pytest

from gpufleet import spec
from gpufleet.parsers.diagnosis import DIAGNOSIS_CODES
from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("key", sorted(spec.KEY_DOCS))
def test_every_inventory_key_is_documented(key: str) -> None:
    assert f"`{key}`" in README, f"inventory key {key!r} is missing from README.md"


@pytest.mark.parametrize("code", sorted(DIAGNOSIS_CODES))
def test_every_diagnosis_code_is_in_troubleshooting(code: str) -> None:
    troubleshooting = README.split("## Troubleshooting", 1)[-1]
    assert f"`{code}`" in troubleshooting, f"diagnosis code {code!r} missing from Troubleshooting"


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^phase tests (.+)$", ci, flags=re.MULTILINE)
    assert commands == ["scripts/test"], ".ci/run does not run the test command as its tests phase"
    assert re.search(r"^scripts/bootstrap && scripts/test\b", README, flags=re.MULTILINE), (
        "README's test command differs from what .ci/run runs"
    )
