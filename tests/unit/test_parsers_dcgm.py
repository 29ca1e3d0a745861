"""dcgmi diag parser on recorded real outputs (sources in tests/fixtures/dcgm/SOURCES.md)."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import gpufleet.parsers.dcgm
import gpufleet.parsers.dcgm_text
from gpufleet.parsers import parse_dcgm_diag
from gpufleet.parsers.dcgm import MIG_NOTE, DcgmTest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_names_its_source():
    sources = fixture("SOURCES.md")
    files = sorted(p.name for p in FIXTURES.iterdir() if p.name != "SOURCES.md")
    assert len(files) >= 14
    dcgm3_json = [n for n in files if n.startswith("dcgm3-") and n.endswith(".json")]
    assert len(dcgm3_json) >= 3, dcgm3_json
    missing = [name for name in files if f"| {name} |" not in sources]
    assert not missing, f"SOURCES.md does not name the source of {missing}"


# file, exit code, format, overall, version, driver, tests, counts {status: n}
CASES = [
    ("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0, "3", "pass", "3.1.0", None, 80, {"pass": 80}),
    ("dcgm3-t400-r3-skip.json", 0, "3", "skip", None, None, 5, {"skip": 5}),
    ("dcgm4-gb10-r1-software-fail.json", 226, "4", "fail", "4.2.3", "580.82.09", 1, {"fail": 1}),
    ("dcgm4-diagnostic-8gpu-pass-fragment.json", None, "4", "pass", None, None, 8, {"pass": 8}),
    ("dcgm4-gb10-r2-4.2.3-partial-skip.json", 226, "4", "fail", "4.2.3", "580.82.09", 3,
     {"fail": 1, "skip": 2}),
    ("dcgm4-gb10-r2-4.5.2-plugins-gated.json", 226, "4", "fail", "4.5.2", "580.82.09", 3,
     {"fail": 1, "skip": 2}),
    ("dcgm4-gb10-r2-4.5.2-plugins-allowed.json", 226, "4", "fail", "4.5.2", "580.82.09", 3,
     {"fail": 1, "pass": 2}),
    ("dcgm4-text-4.2.3-l40s-pcie-fail.txt", None, "text", "fail", "4.2.3", "570.148.08", 13,
     {"pass": 12, "fail": 1}),
    ("dcgm4-text-4.4.1-b200-pcie-fail.txt", None, "text", "fail", "4.4.1", "570.172.08", 25,
     {"pass": 24, "fail": 1}),
    ("dcgm3-text-3.3.1-deployment-pass-excerpt.txt", 0, "text", "pass", "3.3.1", "535.129.03",
     8, {"pass": 8}),
    ("dcgm3-text-3.3.1-gpu0-fail-excerpt.txt", None, "text", "fail", None, None, 4,
     {"pass": 1, "fail": 3}),
    ("dcgm3-virtualclient-r2-pass-1gpu.json", 0, "3", "pass", None, None, 11, {"pass": 11}),
    ("dcgm3-virtualclient-r3-eud-skip-1gpu.json", 0, "3", "pass", None, None, 16,
     {"pass": 15, "skip": 1}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "exit_code", "fmt", "overall", "version", "driver", "count", "counts"), CASES
)
def test_fixture_parses_to_the_expected_tests(
    name, exit_code, fmt, overall, version, driver, count, counts
):
    result = parse_dcgm_diag(fixture(name), exit_code)
    assert (result.format, result.overall, result.version, result.driver) == (
        fmt,
        overall,
        version,
        driver,
    )
    assert len(result.tests) == count
    seen = {status: sum(t.status == status for t in result.tests) for status in counts}
    assert seen == counts
    assert all(t.status in ("pass", "fail", "skip", "warn") for t in result.tests)
    assert result.error is None
    json.dumps(result.to_dict())  # the result is JSON as it stands


def test_dcgm3_results_without_a_gpu_id_are_system_wide_and_level3_skips_are_listed():
    # dcgmi 3.x writes no gpu_id for the Deployment tests: they judge the whole system.
    result = parse_dcgm_diag(fixture("dcgm3-virtualclient-r3-eud-skip-1gpu.json"), 0)
    deployment = [t for t in result.tests if t.category == "Deployment"]
    assert len(deployment) == 9 and all(t.gpu is None for t in deployment)
    assert [(t.name, t.gpu) for t in result.tests if t.status == "skip"] == [("EUD Test", "0")]
    assert {t.name for t in result.tests if t.category == "Stress"} == {
        "Targeted Stress",
        "Targeted Power",
        "Memory Bandwidth",
    }


def test_a_published_malformed_3x_document_is_an_error_naming_what_is_wrong():
    # VirtualClient's "incorrect results" example: the root holds a list, not test_categories.
    result = parse_dcgm_diag(fixture("dcgm3-virtualclient-malformed-cuda-fail.json"), 0)
    assert result.overall == "error"
    assert "'DCGM GPU Diagnostic' holds a list" in (result.error or "")
    assert result.tests == []


def test_nvvs_gpu_id_lists_become_one_result_per_gpu():
    result = parse_dcgm_diag(fixture("dcgm3-nvvs-3.1.0-pass-8gpu.txt"))
    denylist = [t.gpu for t in result.tests if t.name == "Denylist"]
    assert denylist == [str(i) for i in range(8)]
    software = [t.gpu for t in result.tests if t.name == "software"]
    assert software == [str(i) for i in range(8)]  # integer gpu_ids
    assert {t.category for t in result.tests} == {"Deployment", "Custom"}


def test_dcgm3_skips_name_the_gpu():
    result = parse_dcgm_diag(fixture("dcgm3-t400-r3-skip.json"))
    assert [(t.name, t.gpu) for t in result.tests] == [
        ("PCIe", "0"),
        ("GPU Memory", "0"),
        ("Diagnostic", "0"),
        ("EUD Test", "0"),
        ("Targeted Stress", "0"),
    ]


def test_dcgm4_failure_names_gpu_error_text_and_error_id():
    result = parse_dcgm_diag(fixture("dcgm4-gb10-r1-software-fail.json"), 226)
    (failure,) = result.failures()
    assert failure.name == "software" and failure.gpu == "0"
    assert "Persistence mode for GPU 0 is disabled" in failure.message
    assert failure.error_ids == (29,)
    assert result.exit_code == 226
    assert any("226" in note and "DCGM_ST_NVVS_ERROR" in note for note in result.notes)


def test_dcgm4_text_system_level_failure_has_no_gpu_and_keeps_dcgm_words():
    result = parse_dcgm_diag(fixture("dcgm4-text-4.2.3-l40s-pcie-fail.txt"))
    (failure,) = result.failures()
    assert failure == DcgmTest(
        "pcie", None, "fail", failure.message, "Integration"
    )  # every GPU line said Pass
    # the wrapped cell text is joined back: "non-zero s" + "tatus 1'"
    assert "'A child process (152) exited with non-zero status 1'" in failure.message
    assert failure.message.count("There was an internal error during the test") == 4
    pcie_gpus = [t.gpu for t in result.tests if t.name == "pcie" and t.status == "pass"]
    assert pcie_gpus == ["0", "1", "2", "3"]


def test_dcgm3_text_failure_is_attached_to_the_gpu_its_warning_names():
    result = parse_dcgm_diag(fixture("dcgm3-text-3.3.1-gpu0-fail-excerpt.txt"))
    memory = {t.gpu: t for t in result.tests if t.name == "GPU Memory"}
    assert memory["1"].status == "pass" and memory["1"].message == ""
    assert memory["0"].status == "fail"
    assert memory["0"].message.startswith("GPU 0 Error using CUDA API cuCtxCreate Check DCGM")
    assert "'CUDA-capable device(s) is/are busy or unavailable'" in memory["0"].message
    diagnostic = next(t for t in result.tests if t.name == "Diagnostic")
    assert (diagnostic.gpu, diagnostic.status) == (None, "fail")  # "Fail - All"
    assert "cuMemGetInfo failed: 'context is destroyed'" in diagnostic.message


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "empty dcgmi diag output"),
        ("", "empty dcgmi diag output"),
        ("   \n", "empty dcgmi diag output"),
        ('{"version": "4.2.3", "tests": []}', "JSON without a 'DCGM GPU Diagnostic'"),
        ("{not json at all", "unrecognised dcgmi diag output"),
        ("Error: unable to establish a connection to the specified host: localhost\n",
         "DCGM said: Error: unable to establish a connection"),
        ("Errors happen; nothing here came from DCGM\n", "unrecognised dcgmi diag output"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "no test results found in the DCGM 4"),
        ('{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [null]}]}}',
         "no test results found in the DCGM 3"),
        ("[1, 2, 3]", "unrecognised"),
        ('{"DCGM Diagnostic": "nonsense"}', "'DCGM Diagnostic' holds str, not an object"),
    ],
)  # fmt: skip
def test_untrusted_output_is_an_error_with_a_reason_never_a_pass(text, reason):
    result = parse_dcgm_diag(text)
    assert result.overall == "error"
    assert result.error is not None and reason in result.error


def test_a_4x_document_with_tests_hoisted_out_of_test_categories_is_not_a_pass():
    # The shape one widely used parser reads as "no tests found" and keeps its default
    # PASS for: gpufleet reports it as an error instead.
    text = '{"DCGM Diagnostic": {"tests": [{"name": "software", "results": []}]}}'
    result = parse_dcgm_diag(text)
    assert result.overall == "error" and "no test results" in (result.error or "")


def test_runtime_error_is_an_error_even_with_passing_tests():
    # Built here, not recorded: no real document with a runtime_error was found (SOURCES.md).
    document = json.loads(fixture("dcgm4-diagnostic-8gpu-pass-fragment.json"))
    document["runtime_error"] = "The GPU could not be initialized"
    result = parse_dcgm_diag(json.dumps(document))
    assert result.overall == "error"
    assert result.error == "DCGM runtime error: The GPU could not be initialized"


def test_a_failing_3x_result_names_gpu_and_warning():
    # Built here from the recorded T400 document, with one result turned into a failure.
    document = json.loads(fixture("dcgm3-t400-r3-skip.json"))
    result0 = document["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][0]
    result0.update(status="FAIL", warnings=["GPU 0 had uncorrectable memory errors"])
    result = parse_dcgm_diag(json.dumps(document))
    assert result.overall == "fail"
    (failure,) = result.failures()
    assert (failure.name, failure.gpu, failure.message) == (
        "GPU Memory",
        "0",
        "GPU 0 had uncorrectable memory errors",
    )


def test_nonzero_exit_without_a_failing_test_is_an_error():
    result = parse_dcgm_diag(fixture("dcgm3-nvvs-3.1.0-pass-8gpu.txt"), exit_code=226)
    assert result.overall == "error"
    assert "dcgmi diag exited 226 (DCGM_ST_NVVS_ERROR" in (result.error or "")
    other = parse_dcgm_diag(fixture("dcgm3-nvvs-3.1.0-pass-8gpu.txt"), exit_code=255)
    assert "DCGM status -1" in (other.error or "")


def test_unknown_status_word_is_never_a_pass():
    text = (
        '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "memory", "results": '
        '[{"entity_group": "GPU", "entity_id": 3, "status": "Inconclusive"}]}]}]}}'
    )
    result = parse_dcgm_diag(text)
    assert result.overall == "fail"
    (failure,) = result.failures()
    assert failure.gpu == "3" and "'Inconclusive'" in failure.message


def test_text_error_lines_are_the_reason():
    text = "Error: Unable to run diagnostic on unsupported GPU 0.\n" + fixture(
        "dcgm3-text-3.3.1-deployment-pass-excerpt.txt"
    )
    result = parse_dcgm_diag(text)
    assert result.overall == "error"
    assert result.error == "Error: Unable to run diagnostic on unsupported GPU 0."


def test_output_mentioning_mig_carries_the_mig_note():
    result = parse_dcgm_diag("Error: MIG mode is enabled on GPU 0\n")
    assert result.overall == "error"
    assert MIG_NOTE in result.notes


def test_doctests():
    for module in (gpufleet.parsers.dcgm, gpufleet.parsers.dcgm_text):
        outcome = doctest.testmod(module)
        assert outcome.attempted > 0 and outcome.failed == 0


_ODD = [1, -3, 2.5, True, "x", None, [], {}, [1], {"a": 1}]


def _odd_documents():
    for root in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        for odd in _ODD:
            yield {root: odd}
            yield {root: {"test_categories": odd}}
            yield {root: {"test_categories": [{"tests": odd}]}}
            yield {root: {"test_categories": [{"tests": [{"name": odd, "results": odd}]}]}}
            yield {
                root: {"test_categories": [{"category": odd, "tests": [{"name": "t", "results": [
                    {"status": odd, "gpu_id": odd, "entity_id": odd, "entity_group": odd,
                     "warnings": odd, "info": odd}], "test_summary": odd}]}]},
                "runtime_error": odd,
                "metadata": odd,
            }  # fmt: skip


@pytest.mark.parametrize("document", list(_odd_documents()))
def test_oddly_typed_documents_never_raise_and_never_pass_silently(document):
    result = parse_dcgm_diag(json.dumps(document))
    assert result.overall in ("pass", "fail", "error", "skip")
    if result.overall == "pass":
        assert result.tests and all(t.status in ("pass", "warn", "skip") for t in result.tests)


@pytest.mark.parametrize("name", [n for n, *_ in CASES])
def test_truncated_fixtures_never_raise(name):
    text = fixture(name)
    for cut in range(0, len(text), max(1, len(text) // 150)):
        for part in (text[:cut], text[cut:]):
            result = parse_dcgm_diag(part)
            assert result.overall in ("pass", "fail", "error", "skip")


def test_truncated_json_is_never_a_pass():
    # A -j document cut short (a killed dcgmi, a full disk) must not pass on what is left.
    for name in ("dcgm3-nvvs-3.1.0-pass-8gpu.txt", "dcgm4-diagnostic-8gpu-pass-fragment.json"):
        text = fixture(name).rstrip()
        for cut in range(text.index("{") + 1, len(text) - 1, 97):
            assert parse_dcgm_diag(text[:cut]).overall == "error", (name, cut)


def test_deeply_nested_input_is_an_error_not_a_crash():
    result = parse_dcgm_diag('{"a": ' * 100_000 + "1" + "}" * 100_000)
    assert result.overall == "error"


def test_one_result_for_several_gpus_gives_each_gpu_its_own_warnings():
    # Built here (the 3.x shape of NVVS, "gpu_ids" shared by four GPUs with per-GPU warnings).
    text = json.dumps(
        {"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name": "sm_stress", "results": [
            {"gpu_ids": "0,1,2,3", "status": "FAIL", "warnings": [
                "Max stress level of 2128.7 did not exceed 3000.0 for GPU 0",
                "Max stress level of 1096.5 did not exceed 3000.0 for GPU 2",
                "Check DCGM and system logs for errors."]}]}]}]}}
    )  # fmt: skip
    by_gpu = {t.gpu: t.message for t in parse_dcgm_diag(text).failures()}
    assert by_gpu["0"] == (
        "Max stress level of 2128.7 did not exceed 3000.0 for GPU 0; "
        "Check DCGM and system logs for errors."
    )
    assert by_gpu["1"] == "Check DCGM and system logs for errors."
    assert "for GPU 2" in by_gpu["2"] and "GPU 0" not in by_gpu["2"]


def test_gated_and_allowed_runs_differ_only_in_the_plugins_that_ran():
    gated = parse_dcgm_diag(fixture("dcgm4-gb10-r2-4.5.2-plugins-gated.json"), 226)
    allowed = parse_dcgm_diag(fixture("dcgm4-gb10-r2-4.5.2-plugins-allowed.json"), 226)
    status = {t.name: t.status for t in gated.tests}
    assert status == {"software": "fail", "memory": "skip", "pcie": "skip"}
    assert {t.name: t.status for t in allowed.tests} == {
        "software": "fail",
        "memory": "pass",
        "pcie": "pass",
    }
    # the summary repeats the result's warning: still one failure, not two
    assert [(t.name, t.gpu) for t in allowed.failures()] == [("software", "0")]
