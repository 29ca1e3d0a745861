"""Security findings of issue 10 on the control node: 7 (ssh names), 15 (markup), 17 (lost or
escaped hosts) and 20 (terminal escapes); credentials are in test_security_credentials.py.

Each test is named after its finding in ../shared/reviews/security-audit.md and uses the real
mechanism where it runs here: OpenSSH reading the generated ssh_config, rich rendering to a
terminal, the real `gpufleet validate` / `report` / `drift` code writing real files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.commands import report as report_cmd
from gpufleet.commands import validate as validate_cmd
from gpufleet.diagnose import run as diagnose_run
from gpufleet.drift import check as drift_check
from gpufleet.drift.plan import DriftReport, HostDrift
from gpufleet.inventory import InventoryError, InventoryHost
from gpufleet.report.terminal import print_report
from gpufleet.validate.baseline import safe_name
from tests import pyinfra_cli
from tests.unit.security_helpers import (
    assert_no_host_escapes,
    inventory_file,
    results_doc,
    terminal,
    write_doc,
)

# ---- finding 7: ssh names ---------------------------------------------------------------------


def test_finding7_shell_in_ssh_hostname_never_reaches_proxyjump(tmp_path):
    """The audit's repro, through `gpufleet validate` and the real OpenSSH: a ProxyJump from
    the user's own ssh_config would hand HostName to a shell; the name is refused first."""
    marker = tmp_path / "pwn_ssh"
    user_config = tmp_path / "user_ssh_config"
    user_config.write_text("Host gpufleet-*\n    ProxyJump jump@127.0.0.1:1\n")
    inventory = inventory_file(
        tmp_path,
        {"ssh_hostname": f"x' $(touch {marker}) '", "ssh_config_file": str(user_config)},
    )
    results = tmp_path / "results"
    code = validate_cmd.main([str(inventory), "--results-dir", str(results)])
    assert not marker.exists(), "the host name ran as a shell command"
    assert code == 2
    (path,) = results.glob("gpu-a/*.json")
    error = json.loads(path.read_text())["run_error"]
    assert "ssh_hostname" in error and "is not a host name" in error


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ssh_hostname", "x' $(id) '"),
        ("ssh_hostname", "-oProxyCommand=id"),
        ("ssh_hostname", "host;id"),
        ("ssh_hostname", "a b"),
        ("ssh_hostname", ".."),
        ("ssh_user", 'ops"x'),
        ("ssh_user", "ops@evil.example"),
        ("ssh_user", "-lroot"),
        ("ssh_user", "o$(id)"),
    ],
)
def test_finding7_names_outside_the_pattern_are_refused(field, value):
    from gpufleet.validate.ssh import check_ssh_names, host_problem

    host = InventoryHost(
        name="gpu-a",
        connector="ssh",
        ssh_hostname=value if field == "ssh_hostname" else "gpu-a",
        ssh_user=value if field == "ssh_user" else None,
    )
    with pytest.raises(InventoryError, match=field):
        check_ssh_names(host)
    assert field in host_problem(host)


@pytest.mark.parametrize(
    "hostname", ["gpu-a", "gpu_a.dc1.example.com", "10.0.0.5", "fe80::1%eth0", "[2001:db8::1]"]
)
def test_finding7_ordinary_names_pass(hostname):
    from gpufleet.validate.ssh import check_ssh_names, host_problem

    host = InventoryHost("gpu-a", "ssh", hostname, 22, "ops", None, {"_sudo_user": "root"})
    check_ssh_names(host)
    assert host_problem(host) == ""


# ---- finding 15: rich markup ------------------------------------------------------------------

MARKUP = "libcuda not found [/usr/lib/x86_64-linux-gnu/libcuda.so.1]"
LINK = "[link=https://evil.example/]click me[/link]"


def test_finding15_markup_in_check_message_is_shown_literally():
    console, out = terminal()
    print_report([results_doc("gpu-[/x]", MARKUP), results_doc("gpu-b", LINK)], console=console)
    text = out.getvalue()
    assert "[/usr/lib/x86_64-linux-gnu/libcuda.so.1]" in text
    assert "gpu-[/x]" in text and "[link=https://evil.example/]" in text
    assert "\x1b]8;" not in text  # no OSC 8 hyperlink


def test_finding15_markup_in_host_name_is_shown_literally(tmp_path, capsys):
    write_doc(tmp_path, results_doc("gpu-[/x]", LINK))
    assert report_cmd.main([str(tmp_path)]) == 1  # its check failed (docs/reference/exit-codes.md)
    out = capsys.readouterr().out
    assert "gpu-[/x]" in out and "evil.example" not in out.replace("[link=https://evil", "")


def test_finding15_markup_in_drift_output_is_shown_literally(capsys):
    report = DriftReport(
        hosts={"gpu-[/x]": HostDrift(name="gpu-[/x]", status="drift", changes=[MARKUP, LINK])},
        checked_at="",
    )
    drift_check.print_report(report)
    out = capsys.readouterr().out
    assert "gpu-[/x]" in out and MARKUP in out and LINK in out


# ---- finding 20: terminal escape sequences ----------------------------------------------------

HOSTILE = "Ubuntu\x1b]0;TITLE-SET-BY-HOST\x07 22.04\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\x9d0;x"


def test_finding20_escape_sequences_from_hosts_are_stripped_in_validate_table():
    console, out = terminal()
    print_report([results_doc(f"gpu-a{HOSTILE}", HOSTILE)], console=console)
    text = out.getvalue()
    assert_no_host_escapes(text)
    assert "TITLE-SET-BY-HOST" in text  # the words stay, only the control characters go


def test_finding20_escape_sequences_are_stripped_in_report_and_drift(tmp_path, capsys):
    write_doc(tmp_path, results_doc("gpu-a", HOSTILE))
    assert report_cmd.main([str(tmp_path)]) == 1  # a host failed (exit codes)
    assert_no_host_escapes(capsys.readouterr().out)
    report = DriftReport(
        hosts={"gpu-a": HostDrift(name="gpu-a", status="error", reason=HOSTILE)}, checked_at=""
    )
    drift_check.print_report(report)
    assert_no_host_escapes(capsys.readouterr().out)


def test_finding20_escape_sequences_are_stripped_in_diagnose(tmp_path, capsys):
    import argparse

    log = tmp_path / "dmesg.log"
    log.write_text(f"Failed to initialize NVML: Driver/library version mismatch {HOSTILE}\n")
    diagnose_run(argparse.Namespace(file=str(log), json=False, codes=False))
    out = capsys.readouterr().out
    assert "line 1" in out
    assert_no_host_escapes(out)


def test_finding20_plain_removes_controls_and_keeps_newlines():
    from gpufleet.text import plain

    assert plain("a\x1b[31mb\x07\nc\td\r") == "a[31mb\nc d"
    assert plain("tf\udcff") == "tf\\udcff"  # a lone surrogate cannot crash the terminal


# ---- finding 17: hosts that vanished or escaped -----------------------------------------------


def test_finding17_unreadable_host_is_an_error_row_not_dropped(tmp_path, capsys):
    write_doc(tmp_path, results_doc("gpu-b"))
    (tmp_path / "gpu-a").mkdir()
    (tmp_path / "gpu-a" / "20261201T000000Z-abc123.json").write_bytes(b"\xff\xfe{not json")
    assert report_cmd.main([str(tmp_path), "--json"]) == 1  # a host failed (exit codes)
    captured = capsys.readouterr()
    hosts = {h["host"]: h for h in json.loads(captured.out)["hosts"]}
    assert set(hosts) == {"gpu-a", "gpu-b"}
    assert hosts["gpu-a"]["status"] == "error"
    assert "no readable results document" in hosts["gpu-a"]["run_error"]
    assert "gpu-a" in captured.err


def test_finding17_hosts_named_junit_and_dot_x_are_reported(tmp_path, capsys):
    inventory = tmp_path / "inv.py"
    # Bad data for every host: validate refuses them before SSH, and writes their results.
    inventory.write_text(
        "hosts = [('junit', {'tf_versoin': 1}), ('.gpu-a', {'tf_versoin': 1}),"
        " ('gpu-b', {'tf_versoin': 1})]\n"
    )
    results = tmp_path / "r"
    assert validate_cmd.main([str(inventory), "--results-dir", str(results)]) == 2
    capsys.readouterr()
    assert report_cmd.main([str(results), "--json"]) == 1  # a host failed (exit codes)
    hosts = [h["host"] for h in json.loads(capsys.readouterr().out)["hosts"]]
    assert sorted(hosts) == [".gpu-a", "gpu-b", "junit"]


def test_finding17_host_named_dotdot_stays_inside_results_dir(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = [('..', {'tf_versoin': 1}), ('.', {'tf_versoin': 1})]\n")
    results = tmp_path / "r6" / "sub"
    assert validate_cmd.main([str(inventory), "--results-dir", str(results)]) == 2
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json"))
    assert written and all(p.startswith("r6/sub/") for p in written), written
    assert len({Path(p).parent for p in written}) == 2  # one folder per host


@pytest.mark.parametrize("name", ["..", ".", ".x", "a/b", "a_b", "junit", "@ssh/gpu-b", "ü"])
def test_finding17_folder_names_are_distinct_and_never_special(name):
    folder = safe_name(name)
    assert "/" not in folder and not folder.startswith(".")
    others = {"..", ".", ".x", "a/b", "a_b", "junit", "@ssh/gpu-b", "ü"} - {name}
    assert folder not in {safe_name(other) for other in others}


def test_finding20_os_release_escapes_never_reach_the_deploy_output(tmp_path, monkeypatch):
    """The audit's repro: a host whose PRETTY_NAME sets the terminal title, planned by the real
    pyinfra CLI on an @fake host; the plan line keeps the words without the escape."""

    from tests.unit import fake_fleet

    hostile = "Ubuntu\x1b]0;TITLE-SET-BY-HOST\x07 22.04 LTS\x1b]52;c;ZXZpbA==\x07"
    monkeypatch.setitem(fake_fleet.OS_RELEASE, ("ubuntu", "22.04"), hostile)
    inventory = fake_fleet.write_inventory(tmp_path / "inv.py", {"h": fake_fleet.FakeGpuHost()})
    proc = pyinfra_cli.run(inventory, pyinfra_cli.GPU_NODE, "--dry", timeout=180)
    output = proc.stdout + proc.stderr
    assert "gpufleet plan: Ubuntu]0;TITLE-SET-BY-HOST 22.04" in output, output[-2000:]
    assert "\x1b]0;" not in output and "\x1b]52;" not in output and "\x07" not in output


def test_finding7_openssh_reads_the_checked_names_back_unchanged(tmp_path):
    """`ssh -G` (the real OpenSSH parser, no connection) on the generated config: each name
    that passes the check arrives at ssh exactly as written in the inventory."""
    import subprocess

    from gpufleet.validate.ssh import ssh_config_text

    names = ["gpu-a", "gpu_b.dc1.example.com", "10.0.0.5", "fe80::1"]
    hosts = [
        (f"gpufleet-{i:03d}", InventoryHost(f"h{i}", "ssh", name, 2222, "ops_1", None, {}))
        for i, name in enumerate(names)
    ]
    config = tmp_path / "ssh_config"
    config.write_text(ssh_config_text(hosts, control_dir=tmp_path))
    for (alias, _host), name in zip(hosts, names, strict=True):
        out = subprocess.run(
            ["ssh", "-F", str(config), "-G", alias],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()
        assert f"hostname {name}" in out and "user ops_1" in out and "port 2222" in out


def test_finding20_host_output_with_escapes_still_gives_valid_junit(tmp_path):
    """A run_error quoting a host's log with ESC/BEL: the merged JUnit XML stays parseable
    (XML 1.0 cannot carry those characters) and keeps the words."""
    import xml.etree.ElementTree as ET

    from gpufleet.validate.hostrun import HostRun
    from gpufleet.validate.results import merge_junit

    host = InventoryHost("gpu-a", "ssh", "gpu-a")
    run = HostRun(host, "gpufleet-000", *(tmp_path / n for n in ("e", "r", "j", "l")))
    run.document = results_doc("gpu-a", run_error=f"ssh said: {HOSTILE}")
    out = tmp_path / "junit.xml"
    merge_junit([run], out)
    error = ET.parse(out).getroot().find("testsuite/testcase/error")
    assert error is not None and "TITLE-SET-BY-HOST" in error.get("message", "")
    assert_no_host_escapes(out.read_text())


def test_finding17_baseline_of_a_dotdot_host_stays_in_its_folder():
    from gpufleet.validate.baseline import baseline_path

    for name in ("..", "."):
        path = baseline_path("r/sub", name)
        assert ".." not in path.parts and path.parent.parent == Path("r/sub"), path
