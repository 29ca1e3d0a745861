"""`diagnose` and `gpufleet diagnose` on real failure logs (sources in
tests/fixtures/diagnose/SOURCES.md)."""

from __future__ import annotations

import io
import itertools
import json
import re
from pathlib import Path

import pytest

from gpufleet import cli
from gpufleet.commands.diagnose import main
from gpufleet.parsers import diagnose
from gpufleet.parsers.diagnosis import DIAGNOSIS_CODES, SEVERITIES, codes_markdown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnose"
ALL = sorted(p.name for p in FIXTURES.glob("*.txt"))


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# fixture -> every code expected, errors first then by line
EXPECTED = {
    "nvml-mismatch.txt": ["nvml-driver-library-mismatch"],
    "secure-boot-key-rejected.txt": ["nvidia-smi-no-driver", "secure-boot-key-rejected"],
    "tf-no-cuda-drivers.txt": ["tf-cuda-driver-not-found", "tf-trt-not-found"],
    "tf-cannot-dlopen.txt": ["tf-cannot-dlopen"],
    "tf-cuinit-303.txt": ["tf-cuda-driver-not-found"],
    "tf-cuinit-no-device.txt": ["tf-cuda-driver-not-found"],
    "xla-libdevice.txt": ["xla-libdevice-not-found"],
    "xla-libdevice-dir.txt": ["xla-libdevice-dir-missing"],
    "ptxas-not-found.txt": ["ptxas-not-found"],
    "ptxas-fallback-to-driver.txt": ["ptxas-fallback-to-driver"],
    "ptx-no-compilation-provider.txt": ["ptxas-not-found", "tf-gpu-device-created"],
    "cudnn-mismatch.txt": ["cudnn-version-mismatch"],
    "dkms-build-failed.txt": ["nvidia-smi-no-driver", "dkms-build-failed"],
    "apt-held-broken.txt": ["apt-held-broken-packages"],
    "nvidia-smi-no-nvml-library.txt": ["nvidia-smi-no-nvml-library"],
    "nouveau-owns-gpu.txt": ["nouveau-owns-gpu"],
    "gpu-unsupported-by-driver.txt": ["gpu-unsupported-by-driver"],
    "healthy-tf-gpu.txt": ["tf-gpu-device-created"],
    "healthy-tf-gpu-numa.txt": ["numa-node-negative", "tf-gpu-device-created"],
    # the fault-injection campaign's failures (issue 11 item 12)
    "campaign-dpkg-killed.txt": ["dpkg-interrupted"],
    "campaign-dpkg-interrupted-rerun.txt": ["dpkg-interrupted"],
    "campaign-link-cut.txt": ["apt-fetch-network-error"],
    "campaign-enospc.txt": ["no-space-left"],
    "campaign-half-installed-env.txt": ["python-env-half-installed"],
    "campaign-apt-404.txt": ["apt-fetch-404"],
    "campaign-version-not-found.txt": ["apt-version-not-found"],
    "campaign-key-fingerprint.txt": ["repo-key-fingerprint-mismatch"],
    "campaign-repo-resigned.txt": ["apt-repo-not-signed"],
    "campaign-repo-resigned-second-run.txt": ["apt-unable-to-locate"],
    "campaign-repo-resigned-provisioned.txt": ["apt-repo-not-signed"],
    "campaign-dpkg-lock.txt": ["apt-dpkg-lock-held"],
    "campaign-two-deploys.txt": ["apt-unable-to-locate", "apt-dpkg-lock-held"],
    "campaign-reboot-timeout.txt": ["reboot-timeout"],
    "campaign-host-unreachable-deploy.txt": ["ssh-connection-lost"],
    "campaign-host-unreachable-validate.txt": ["ssh-connection-lost"],
    # recorded on the sandbox (SOURCES.md names the commands and the date)
    "sandbox-two-deploys-refused.txt": ["deploy-already-running"],
    # DCGM's own errors from dcgmi diag runs that could not start (issue 38)
    "dcgm-diag-mig-group-empty.txt": ["dcgm-diag-mig-enabled", "dcgm-diag-group-empty"],
    "dcgm-hostengine-unreachable.txt": ["dcgm-hostengine-unreachable"],
    "dcgm-unsupported-cuda-fragment.txt": ["dcgm-diag-cuda-unsupported"],
    "dcgm-nvvs-binary-not-found.txt": ["dcgm-nvvs-missing"],
}
CAMPAIGN = [name for name in EXPECTED if name.startswith("campaign-")]


def test_every_fixture_names_its_source_and_expectation():
    sources = fixture("SOURCES.md")
    missing = [name for name in ALL if f"| {name} |" not in sources]
    assert not missing, f"SOURCES.md does not name the source of {missing}"
    assert sorted(EXPECTED) == ALL


@pytest.mark.parametrize("name", ALL)
def test_real_logs(name):
    assert [finding.code for finding in diagnose(fixture(name))] == EXPECTED[name]


def test_every_code_is_seen_in_a_real_log():
    seen = {code for codes in EXPECTED.values() for code in codes}
    assert seen == set(DIAGNOSIS_CODES)


@pytest.mark.parametrize("name", ["healthy-tf-gpu.txt", "healthy-tf-gpu-numa.txt"])
def test_healthy_log_has_no_error_or_warning(name):
    assert {finding.severity for finding in diagnose(fixture(name))} == {"info"}


def test_finding_points_at_the_line_and_counts_repeats():
    (finding,) = diagnose(fixture("cudnn-mismatch.txt"))
    assert finding.severity == "error"
    assert finding.line_number == 1 and finding.count == 2
    assert "Loaded runtime CuDNN library: 9.1.0 but source was compiled with: 9.3.0" in finding.line
    assert finding.fix == DIAGNOSIS_CODES["cudnn-version-mismatch"][2]


def test_secure_boot_line_is_the_modprobe_one():
    findings = {f.code: f for f in diagnose(fixture("secure-boot-key-rejected.txt"))}
    assert findings["secure-boot-key-rejected"].line == (
        "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
    )


def test_code_table_is_well_formed():
    for code, (severity, message, fix) in DIAGNOSIS_CODES.items():
        assert code == code.lower() and " " not in code
        assert severity in SEVERITIES
        assert message and "\n" not in message and message.endswith(".")
        assert fix and "\n" not in fix


def test_unrelated_text_has_no_findings():
    assert diagnose("Reading package lists... Done\nBuilding dependency tree... Done\n") == []


def test_to_dict_is_json():
    data = json.loads(json.dumps([f.to_dict() for f in diagnose(fixture("nvml-mismatch.txt"))]))
    assert data[0]["code"] == "nvml-driver-library-mismatch" and data[0]["line_number"] == 2


# --- gpufleet diagnose ------------------------------------------------------------------------


def test_cli_exit_1_on_error_and_prints_fix(capsys):
    assert main([str(FIXTURES / "secure-boot-key-rejected.txt")]) == 1
    out = capsys.readouterr().out
    assert "secure-boot-key-rejected" in out and "mokutil --import" in out
    assert "ERROR" in out


def test_cli_exit_0_on_healthy_log(capsys):
    assert main([str(FIXTURES / "healthy-tf-gpu.txt")]) == 0
    assert "tf-gpu-device-created" in capsys.readouterr().out


def test_cli_reads_stdin_and_prints_json(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(fixture("nvml-mismatch.txt")))
    assert main(["-", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["code"] == "nvml-driver-library-mismatch"


def test_cli_nothing_found(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("all good\n"))
    assert main([]) == 0
    assert "No known failure signature" in capsys.readouterr().out


def test_cli_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path / "nope.log")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_does_not_choke_on_rich_markup(tmp_path, capsys):
    log = tmp_path / "markup.log"
    log.write_text("[bold]Failed to initialize NVML: Driver/library version mismatch[/x]\n")
    assert main([str(log)]) == 1
    assert "[bold]Failed to initialize NVML" in capsys.readouterr().out


def test_gpufleet_command_dispatches_to_diagnose(capsys):
    assert cli.main(["diagnose", str(FIXTURES / "dkms-build-failed.txt")]) == 1
    assert "dkms-build-failed" in capsys.readouterr().out


def test_codes_table_lists_every_code(capsys):
    assert main(["--codes"]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(DIAGNOSIS_CODES)


# --- linear time on long lines (issue 10, finding 19) ------------------------------------------


def _repeats(tree, nested: bool = False):
    """Every repeat in a parsed regex as (max, nested-inside-another-repeat)."""
    import re._constants as sre  # the parser's own opcodes, to walk its tree

    for op, arg in tree:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            _low, high, sub = arg
            yield high, nested
            yield from _repeats(sub, True)
        elif op == sre.SUBPATTERN:
            yield from _repeats(arg[-1], nested)
        elif op == sre.BRANCH:
            for branch in arg[1]:
                yield from _repeats(branch, nested)


def test_finding_19_no_fragment_has_an_unbounded_or_nested_repeat():
    """Each fragment is searched once per line, so bounded, unnested repeats keep the work
    linear in the line's length; `.*` only ever joins fragments."""
    import re._constants as sre
    import re._parser

    from gpufleet.parsers.diagnosis import SIGNATURE_PATTERNS, compile_signature

    offenders = []
    for code, patterns in SIGNATURE_PATTERNS.items():
        for pattern in patterns:
            for fragment in compile_signature(pattern):
                for high, nested in _repeats(re._parser.parse(fragment.pattern)):
                    if high == sre.MAXREPEAT or high > 200 or nested:
                        offenders.append((code, fragment.pattern))
    assert offenders == []


def _hostile_line(size: int) -> str:
    """A line built to make backtracking patterns work hard: many partial matches of the
    nouveau, unsupported-GPU and TensorFlow-device signatures, none of them complete."""
    pieces = (
        "NVRM: nouveau ",
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b38) ",
        "Created device /job:x",
        "Loaded runtime CuDNN library: 9 ",
    )
    unit = "".join(pieces)
    return (unit * (size // len(unit) + 1))[:size]


def test_finding_19_each_fragment_is_searched_once_a_line_from_where_the_last_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The work on a 1 MiB hostile line: one search per fragment at most, each starting at or
    after the end of the previous one's match, so the line is never rescanned."""
    from gpufleet.parsers import diagnosis

    calls: list[tuple[str, int, int]] = []  # (pattern, start, end of match or -1)

    class Counted:
        def __init__(self, compiled: re.Pattern[str]) -> None:
            self.compiled, self.pattern = compiled, compiled.pattern

        def search(self, line: str, position: int = 0) -> re.Match[str] | None:
            found = self.compiled.search(line, position)
            calls.append((self.pattern, position, found.end() if found else -1))
            return found

    counted = {
        code: tuple(tuple(Counted(f) for f in fragments) for fragments in patterns)
        for code, patterns in diagnosis._SIGNATURES.items()
    }
    monkeypatch.setattr(diagnosis, "_SIGNATURES", counted)
    fragments = sum(len(f) for patterns in counted.values() for f in patterns)
    line = _hostile_line(1024 * 1024)
    diagnose(line)
    assert 0 < len(calls) <= fragments
    assert len({pattern for pattern, _, _ in calls}) == len(calls)  # none searched twice
    ends = {pattern: end for pattern, _, end in calls}
    for patterns in counted.values():
        for chain in patterns:
            for before, after in itertools.pairwise(chain):
                starts = [start for pattern, start, _ in calls if pattern == after.pattern]
                assert all(start == ends[before.pattern] for start in starts)


def test_finding_19_long_lines_still_give_the_right_findings():
    nouveau = (
        "NVRM: This can occur when a driver such as: nouveau, rivafb, nvidiafb or rivatv "
        "was loaded and obtained ownership of the NVIDIA device(s)."
    )
    text = _hostile_line(1024 * 1024) + "\n" + "x" * (1024 * 1024) + " " + nouveau + "\n"
    findings = diagnose(text)
    assert [(f.code, f.line_number, f.count) for f in findings] == [("nouveau-owns-gpu", 2, 1)]


# --- the campaign's provisioning failures (issue 11 item 12) ------------------------------------


@pytest.mark.parametrize("name", CAMPAIGN)
def test_campaign_failure_is_an_error_with_a_fix_and_exit_1(name, capsys):
    assert main([str(FIXTURES / name)]) == 1
    out = capsys.readouterr().out
    assert "No known failure signature" not in out and "fix: " in out


def test_dpkg_interrupted_says_to_configure_it():
    (finding,) = diagnose(fixture("campaign-dpkg-killed.txt"))
    assert finding.line_number == 1 and finding.count == 2
    assert "dpkg --configure -a" in finding.fix


@pytest.mark.parametrize(
    ("name", "code", "fix"),
    [
        ("dcgm-hostengine-unreachable.txt", "dcgm-hostengine-unreachable", "--now nvidia-dcgm"),
        ("dcgm-diag-mig-group-empty.txt", "dcgm-diag-mig-enabled", "-mig 0"),
        ("dcgm-unsupported-cuda-fragment.txt", "dcgm-diag-cuda-unsupported", "-4-cuda<major>"),
        ("dcgm-nvvs-binary-not-found.txt", "dcgm-nvvs-missing", "datacenter-gpu-manager"),
    ],
)
def test_dcgm_errors_point_at_dcgm_line_and_give_the_fix(name, code, fix):
    finding = next(f for f in diagnose(fixture(name)) if f.code == code)
    assert finding.severity == "error" and fix in finding.fix
    assert finding.line in fixture(name).splitlines()  # DCGM's own line, as it printed it
    assert "dcgmi" not in finding.line.split()[:1]  # not the command line above it


def test_the_reference_lists_every_code_as_the_code_does():
    """docs/reference/diagnose-codes.md lists every code with the same severity, meaning and
    fix as the code (it is generated: python -m gpufleet.reference)."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "reference" / "diagnose-codes.md").read_text(encoding="utf-8")
    missing = [row for row in codes_markdown().splitlines() if row not in page]
    assert missing == []
