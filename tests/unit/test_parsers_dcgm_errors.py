"""dcgmi diag runs that could not start: DCGM's own error relayed, with the fix (issue 38)."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import gpufleet.parsers.dcgm_errors
from gpufleet.parsers import parse_dcgm_diag
from gpufleet.parsers.dcgm_errors import DCGM_ERRORS, MAX_LINES
from gpufleet.vendor import judge_dcgm

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def fix(code: str) -> str:
    return next(error.fix for error in DCGM_ERRORS if error.code == code)


# file, format read, DCGM's line (verbatim in the message), the known error's code
ERROR_CASES = [
    ("dcgm-text-hostengine-unreachable.txt", "text",
     "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
     "dcgm-hostengine-unreachable"),
    ("dcgm-text-a100-mig-incompatible.txt", "text",
     "GPU 0's MIG configuration is incompatible with the diagnostic because it prevents access "
     "to the entire GPU.", "dcgm-diag-mig-enabled"),
    ("dcgm3-text-3.1.3-mig-incompatible-gpu2.txt", "text",
     "GPU 2's MIG configuration is incompatible with the diagnostic", "dcgm-diag-mig-enabled"),
    ("dcgm-text-group-empty.txt", "text",
     "Error: Unable to complete diagnostic for group 1. Return: (-35) The specified group is "
     "empty, and this operation is incompatible with an empty group.", "dcgm-diag-group-empty"),
    ("dcgm3-text-3.0.4-unsupported-cuda-fragment.txt", "text",
     "Detected unsupported Cuda version", "dcgm-diag-cuda-unsupported"),
    ("dcgm3-text-3.3.5-nvvs-binary-not-found.txt", "text",
     "the nvvs binary was not found in the specified location; please install it to "
     "/usr/share/nvidia-validation-suite/", "dcgm-nvvs-missing"),
    ("dcgm-nvvs-json-runtime-error-hostengine-log.txt", "3",
     "Unable to get the driver version: Host engine connection invalid/disconnected. Couldn't "
     "succeed despite 0 retries.", "dcgm-hostengine-unreachable"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fmt", "line", "code"), ERROR_CASES)
def test_error_only_output_relays_dcgm_line_and_fix(name, fmt, line, code):
    result = parse_dcgm_diag(fixture(name))
    assert (result.overall, result.format, result.tests) == ("error", fmt, [])
    assert result.error is not None
    assert line in result.error
    assert result.error.endswith(f"; fix: {fix(code)}")
    assert "unrecognised" not in result.error


def test_at_least_six_distinct_dcgm_errors_are_recorded_and_relayed():
    relayed = {
        (line, code)
        for name, _, line, code in ERROR_CASES
        if f"fix: {fix(code)}" in (parse_dcgm_diag(fixture(name)).error or "")
    }
    assert len({line for line, _ in relayed}) >= 6 and len({code for _, code in relayed}) >= 5
    # every error marked recorded has a fixture (gpufleet diagnose relies on the same marks)
    assert {code for _, code in relayed} == {e.code for e in DCGM_ERRORS if e.recorded}


@pytest.mark.parametrize(("name", "fmt", "line", "code"), ERROR_CASES)
def test_the_gate_names_dcgm_line_and_fix_with_the_exit_status(name, fmt, line, code):
    # dcgmi exits with DCGM's status as an unsigned byte: 235 is -21, a connection not valid.
    verdict = judge_dcgm(parse_dcgm_diag(fixture(name), exit_code=235), level=1)
    assert verdict.status == "error"
    assert line in verdict.reason and fix(code) in verdict.reason
    assert "dcgmi diag exited 235 (DCGM status -21)" in verdict.reason


@pytest.mark.parametrize("name", [name for name, *_ in ERROR_CASES])
def test_truncated_error_outputs_never_pass(name):
    text = fixture(name)
    for cut in range(0, len(text), max(1, len(text) // 60)):
        for part in (text[:cut], text[cut:]):
            assert parse_dcgm_diag(part).overall == "error", (name, cut)


def test_one_line_once_and_the_command_line_left_out():
    # dcgm-text-a100-mig-incompatible.txt holds nvvs's line twice.
    result = parse_dcgm_diag(fixture("dcgm-text-a100-mig-incompatible.txt"))
    assert (result.error or "").count("MIG configuration is incompatible") == 1
    said = parse_dcgm_diag("dcgmi diag -r 1 -j\n" + fixture("dcgm-text-group-empty.txt"))
    assert "dcgmi diag -r 1" not in (said.error or "")


def test_many_error_lines_are_capped():
    text = "".join(f"Error: line {n}\n" for n in range(MAX_LINES + 3))
    result = parse_dcgm_diag(text)
    assert result.overall == "error" and "and 3 more line(s)" in (result.error or "")
    assert f"Error: line {MAX_LINES}" not in (result.error or "")


@pytest.mark.parametrize(
    "text",
    [
        "| Error: looks like a table cell | but no table |\n",
        "Segmentation fault (core dumped)\n",
        "some error happened\n",
    ],
)
def test_text_dcgm_did_not_write_stays_unrecognised(text):
    result = parse_dcgm_diag(text)
    assert (result.overall, result.format) == ("error", "")
    assert "unrecognised dcgmi diag output" in (result.error or "")


# Built here, not recorded: no captured DCGM 4.x error run was found (SOURCES.md). The shape is
# dcgmi's own (dcgmi/Diag.cpp HelperDisplayFailureMessage with -j: "version" and
# "runtime_error" under "DCGM Diagnostic"); the words are DCGM's strings quoted in SOURCES.md.
@pytest.mark.parametrize(
    ("said", "code"),
    [
        ("Error: Diagnostic could not be run because the Tesla recommended driver is not being "
         "used.", "dcgm-diag-driver-unsupported"),
        ("Plugins directory was not found.  Please check paths or use -p to set it.",
         "dcgm-diag-plugins-missing"),
        ("Error: Unable to complete diagnostic. Return: (-29) : Host engine is running as "
         "non-root\n", "dcgm-diag-not-root"),
    ],
)  # fmt: skip
def test_a_4x_json_error_document_keeps_format_dcgm_words_and_fix(said, code):
    document = {"DCGM Diagnostic": {"version": "4.6.0", "runtime_error": said}}
    result = parse_dcgm_diag(json.dumps(document, indent=3))
    assert (result.overall, result.format, result.version) == ("error", "4", "4.6.0")
    assert said in (result.error or "") and (result.error or "").endswith(fix(code))


def test_an_unknown_dcgm_error_is_relayed_without_a_fix():
    result = parse_dcgm_diag("Error: Diagnostic could not be run while DCGM is paused.\n")
    assert (result.overall, result.format) == ("error", "text")
    assert result.error == (
        "dcgmi diag could not run; DCGM said: Error: Diagnostic could not be run while DCGM is "
        "paused."
    )


def test_doctests():
    outcome = doctest.testmod(gpufleet.parsers.dcgm_errors)
    assert outcome.attempted > 0 and outcome.failed == 0
