"""Issue 10 acceptance on the control node: no credential from a URL key in anything
`gpufleet validate`, `drift` or `report` prints or writes (results JSON, JUnit, drift.json,
terminal, --json, HTML). Findings 8 and 16 of ../shared/reviews/security-audit.md."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from gpufleet.commands import report as report_cmd
from gpufleet.commands import validate as validate_cmd
from gpufleet.drift import check as drift_check
from gpufleet.drift.plan import DriftReport, HostDrift
from tests.unit.security_helpers import inventory_file, results_doc, write_doc

# ---- acceptance: no credential in anything the control node prints or writes -----------------

SECRETS = ("REPOPASS3", "KEYPASS5", "MFPASS4", "PIPPASS2", "QTOKEN8", "PROXYPASS1", "TOKENAPT6")
URLS = {
    "nvidia_repo_url": "ftp://repouser:REPOPASS3@mirror.example/cuda",
    "nvidia_repo_key_url": "https://keyuser:KEYPASS5@mirror.example/key.pub",
    "miniforge_url": "https://mfuser:MFPASS4@mirror.example/Miniforge3.sh",
    "pip_index_url": "https://pipuser:PIPPASS2@pypi.example/simple?token=QTOKEN8",
    "apt_proxy": "http://proxyuser:PROXYPASS1@proxy.example:3128",
}


def assert_no_secret(text: str, where: str) -> None:
    found = [s for s in SECRETS if s in text]
    assert not found, f"{where} holds {found}"


def test_credentials_in_every_url_key_are_printed_and_written_nowhere(tmp_path, capsys):
    inventory = inventory_file(tmp_path, URLS, name="@local")
    results = tmp_path / "results"
    junit = tmp_path / "junit.xml"
    code = validate_cmd.main(
        [str(inventory), "--results-dir", str(results), "--junit-xml", str(junit)]
    )
    assert code == 2  # ftp:// is refused by the spec, with the value quoted in the message
    validate_out = capsys.readouterr()
    assert_no_secret(validate_out.out + validate_out.err, "validate's output")
    (path,) = (p for p in results.glob("@local/*.json") if not p.name.startswith("baseline"))
    for written in results.rglob("*.json"):  # the run's document and any baseline it joined
        assert_no_secret(written.read_text(), str(written.relative_to(results)))
    document = json.loads(path.read_text())
    assert (
        "nvidia_repo_url" in document["run_error"]
        and "***@mirror.example" in (document["run_error"])
    )
    assert_no_secret(path.read_text(), "the results JSON")
    assert_no_secret(junit.read_text(), "the JUnit XML")
    # A document written elsewhere (the hosts' periodic runs, an older gpufleet) with every URL:
    write_doc(results, results_doc("gpu-b", " ".join(URLS.values()), None))
    write_doc(results, results_doc("gpu-c", run_error=f"apt failed for {URLS['apt_proxy']}"))
    html = tmp_path / "fleet.html"
    assert report_cmd.main([str(results), "--html", str(html)]) == 1  # a host failed (exit codes)
    assert report_cmd.main([str(results), "--json"]) == 1  # a host failed (exit codes)
    report_out = capsys.readouterr()
    assert_no_secret(report_out.out + report_out.err, "report's output")
    assert_no_secret(html.read_text(), "the HTML report")
    assert "mirror.example" in html.read_text()  # the host part stays, for the operator
    drift = DriftReport(
        hosts={
            "gpu-b": HostDrift(
                name="gpu-b", status="drift", reason=URLS["pip_index_url"], changes=[*URLS.values()]
            )
        },
        checked_at="",
    )
    drift_check.print_report(drift)
    drift_check.write_drift_files(drift, tmp_path / "drift")
    assert_no_secret(capsys.readouterr().out, "drift's output")
    assert_no_secret((tmp_path / "drift" / "gpu-b" / "drift.json").read_text(), "drift.json")
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "***" in error.get("message", "")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("https://u:pw@m.example/x", "https://***@m.example/x"),
        ("https://TOKEN@m.example/x", "https://***@m.example/x"),
        ("https://m.example/simple?token=abc&x=1", "https://m.example/simple?***"),
        ("'http://u:p@w@proxy:3128'", "'http://***@proxy:3128'"),
        ("ssh://ops@10.0.0.5:2222", "ssh://ops@10.0.0.5:2222"),  # a login, not a secret
        ("ssh://ops:pw@10.0.0.5", "ssh://***@10.0.0.5"),
        ("https://m.example/repos/ubuntu2204", "https://m.example/repos/ubuntu2204"),
    ],
)
def test_credentials_redact_hides_userinfo_and_query(raw, shown):
    from gpufleet.text import redact

    assert redact(raw) == shown


HTTPS_URLS = {**URLS, "nvidia_repo_url": "https://repouser:REPOPASS3@mirror.example/cuda"}


def test_credentials_accepted_urls_leave_no_trace_in_a_real_local_run(tmp_path, capsys):
    """The spec accepts these URLs, so the real suite runs (two cheap checks on this machine)
    with the credentials in its expectations; nothing it hands back keeps them. (A guard: on
    e069d48 this path leaked nothing either; the leak was the refused-URL message above.)"""
    inventory = inventory_file(tmp_path, HTTPS_URLS, name="@local")
    results = tmp_path / "results"
    junit = tmp_path / "junit.xml"
    select = ["--select", "os_supported or nouveau_not_loaded"]
    code = validate_cmd.main(
        [str(inventory), "--results-dir", str(results), "--junit-xml", str(junit), *select]
    )
    out = capsys.readouterr()
    (path,) = (p for p in results.glob("@local/*.json") if not p.name.startswith("baseline"))
    for written in results.rglob("*.json"):  # the run's document and any baseline it joined
        assert_no_secret(written.read_text(), str(written.relative_to(results)))
    document = json.loads(path.read_text())
    assert code in (0, 1) and document["checks"], (code, document["run_error"])
    assert_no_secret(out.out + out.err, "validate's output")
    assert_no_secret(path.read_text(), "the results JSON")
    assert_no_secret(junit.read_text(), "the JUnit XML")


def test_credentials_in_every_url_key_stay_out_of_drift(tmp_path, capsys):
    """`gpufleet drift` planning an @fake host (the real pyinfra plan) whose every URL key
    carries a credential: terminal, --json and drift.json hold none. (A guard: drift's
    sentences name files and packages, not URLs, on e069d48 too.)"""
    from gpufleet.cli import main as gpufleet
    from tests.unit import fake_fleet

    inventory = fake_fleet.write_inventory(
        tmp_path / "inv.py", {"h": fake_fleet.FakeGpuHost(inventory=dict(HTTPS_URLS))}
    )
    deploy = str(fake_fleet.root() / "deploy" / "gpu_node.py")
    argv = ["drift", str(inventory), "--deploy", deploy, "--no-validation"]
    code = gpufleet([*argv, "--results-dir", str(tmp_path / "r")])
    shown = capsys.readouterr()
    assert code in (0, 1), shown.err
    assert "@fake/h" in shown.out
    assert_no_secret(shown.out + shown.err, "drift's terminal output")
    assert gpufleet([*argv, "--json"]) in (0, 1)
    assert_no_secret(capsys.readouterr().out, "drift --json")
    (drift_json,) = (tmp_path / "r").glob("*/drift.json")
    assert_no_secret(drift_json.read_text(), "drift.json")
