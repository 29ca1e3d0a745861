"""`gpufleet drift`: recorded real pyinfra 3.10 outputs, then the command against @local.

Recorded cases live in tests/fixtures/drift/recorded (see SOURCES.md there); the end-to-end
tests run the real pyinfra CLI on this machine with the tiny deploy beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.commands import drift as drift_cmd
from gpufleet.drift.plan import (
    DEFAULT_DEPLOY,
    DriftError,
    PlanRun,
    build_report,
    fatal_message,
    parse_plan,
    parse_stderr,
    plan_command,
)
from gpufleet.drift.sentences import conditional_sentence, operation_part, sentence_for
from gpufleet.report.fleet import read_drift
from tests.unit.drift_recordings import DRIFT, PROBE_DEPLOY, RECORDED, recorded, report_of

# --- the plan command -------------------------------------------------------------------


def test_plan_command_never_skips_change_detection():
    command = plan_command("inv.py", "deploy.py", ["gpu-*"])
    assert command[1:] == ["inv.py", "deploy.py", "--dry", "--json", "--debug", "--limit", "gpu-*"]
    assert "-y" not in command and "--yes" not in command


def test_recordings_were_made_with_the_command_drift_runs():
    for meta_path in RECORDED.glob("*.meta.json"):
        meta = json.loads(meta_path.read_text())
        assert meta["command"][3:6] == ["--dry", "--json", "--debug"], meta_path.name
        assert meta["pyinfra"].endswith("3.10.0"), meta_path.name


# --- recorded runs of the tiny deploy on @local ------------------------------------------


def test_file_present_is_clean_and_the_conditional_op_is_not_drift():
    report = report_of("local_present")
    host = report.hosts["@local"]
    assert host.status == "clean"
    assert host.changes == []
    assert host.conditional == ["conditional check: may differ (checked at run time)"]
    assert report.exit_status == 0


def test_missing_file_is_drift_naming_the_file():
    report = report_of("local_missing")
    host = report.hosts["@local"]
    assert host.status == "drift"
    assert host.changes == ["/nonexistent/gpufleet-drift-probe missing or differs"]
    assert host.operations == ["files.file (path=/nonexistent/gpufleet-drift-probe, touch=False)"]
    assert report.exit_status == 1


def test_unreachable_host_beside_a_reachable_one():
    report = report_of("local_and_unreachable")
    assert report.hosts["@local"].status == "clean"
    down = report.hosts["127.0.0.1"]
    assert down.status == "unreachable"
    assert (
        down.reason == "Could not connect ([Errno None] Unable to connect to port 1 on 127.0.0.1)"
    )
    assert report.exit_status == 3  # could not reach (docs/reference/exit-codes.md)


def test_only_unreachable_hosts_pyinfra_stops_without_a_plan():
    hosts, run = recorded("unreachable")
    assert run.returncode == 1 and parse_plan(run.stdout) is None
    report = build_report(hosts, run)
    assert report.hosts["127.0.0.1"].status == "unreachable"
    assert "Unable to connect to port 1" in (report.hosts["127.0.0.1"].reason or "")
    assert report.exit_status == 3


def test_host_failed_while_planning_is_an_error_with_its_message():
    report = report_of("local_and_refused")
    refused = report.hosts["@fake/refused"]
    assert refused.status == "error"
    assert refused.reason == "failed while planning: refused while planning: x_refuse is set"
    assert report.hosts["@local"].status == "clean"
    assert report.exit_status == 2


def test_deploy_that_raises_stops_every_host_with_the_exception_named():
    report = report_of("local_and_raising")
    for host in report.hosts.values():
        assert host.status == "error"
        assert host.reason is not None
        assert host.reason.endswith("RuntimeError: x_raise is set: this deploy refuses to plan")
    assert "An exception occurred in:" in report.notes[0]
    assert report.exit_status == 2


def test_mistyped_inventory_plans_nothing_and_exits_zero_so_drift_must_check_hosts_first():
    hosts, run = recorded("mistyped_inventory")
    assert hosts == [] and run.returncode == 0 and parse_plan(run.stdout) == []
    assert "is neither an inventory file" in run.stderr
    # This is why gpufleet drift reads the inventory's hosts before planning: see the e2e tests.
    assert build_report(hosts, run).hosts == {}


# --- recorded plans of deploy/gpu_node.py through @fake hosts -----------------------------


def test_real_deploy_names_each_tampered_host_and_nothing_else():
    report = report_of("gpu_node_fake_fleet")
    assert report.hosts["@fake/gpu-clean"].status == "clean"
    assert report.hosts["@fake/gpu-clean"].changes == []
    unheld = report.hosts["@fake/gpu-unheld-nccl-persistenced-dead"]
    assert unheld.status == "drift"
    # One operation per held package, and enabled apart from running: the sentences say which.
    assert unheld.changes == ["nvidia-persistenced not running", "libnccl2 no longer held"]
    edited = report.hosts["@fake/gpu-nouveau-edited"]
    assert edited.changes == [
        "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf differs (nouveau not blacklisted)"
    ]
    assert edited.operations == [
        "gpufleet driver | /etc/modprobe.d/gpufleet-blacklist-nouveau.conf: nouveau blacklisted "
        "(initramfs rebuilt on change)"
    ]


def test_real_deploy_preflight_refusal_is_reported_with_its_fix():
    report = report_of("gpu_node_fake_fleet")
    gone = report.hosts["@fake/gpu-gone"]
    assert gone.status == "error"
    assert gone.reason is not None
    assert "gpufleet preflight refused this host: no NVIDIA GPU on the PCI bus" in gone.reason
    assert "Fix:" in gone.reason
    assert report.exit_status == 2


@pytest.mark.parametrize("case", ["gpu_node_fake_fleet", "gpu_node_fresh_hosts"])
def test_every_operation_of_the_real_deploy_has_a_sentence(case):
    _, run = recorded(case)
    plan = parse_plan(run.stdout)
    assert plan
    unexplained = [op["name"] for op in plan if sentence_for(op["name"]).startswith("would change")]
    assert unexplained == []


def test_fresh_hosts_plan_reads_stage_by_stage():
    report = report_of("gpu_node_fresh_hosts")
    assert report.exit_status == 1
    hgx = report.hosts["@fake/fresh-hgx-h100"].changes
    assert "nvidia-fabricmanager not enabled" in hgx
    assert "nvidia-fabricmanager not running" in hgx
    assert "gpufleet-periodic.timer not started" in hgx
    branch = report.hosts["@fake/branch-570-apt-preferences"].changes
    assert "/etc/apt/preferences.d/gpufleet-nvidia-driver differs (driver branch lock)" in branch
    assert "nvidia-open-570 no longer held" in branch  # no pinning package for 570: held
    assert "libnccl2 no longer held" in branch
    assert "a runfile-installed NVIDIA driver is present" in (
        report.hosts["@fake/replace-runfile"].changes
    )


# --- sentences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        ("gpufleet cuda_stack | libnccl2 held", "libnccl2 no longer held"),
        (
            "gpufleet dcgm | DCGM (datacenter-gpu-manager-4), pinned",
            "DCGM packages missing or at another version",
        ),
        ("gpufleet dcgm | nvidia-dcgm running", "nvidia-dcgm not running"),
        ("gpufleet driver | nvidia-persistenced enabled", "nvidia-persistenced not enabled"),
        ("gpufleet driver | nvidia-persistenced running", "nvidia-persistenced not running"),
        (
            "gpufleet driver | nvidia-fabricmanager running (NVSwitch)",
            "nvidia-fabricmanager not running",
        ),
        (
            "gpufleet driver | /etc/apt/preferences.d/00-gpufleet-no-distro-nvidia-driver: distro "
            "builds of the NVIDIA driver blocked (NVIDIA's repository only)",
            "/etc/apt/preferences.d/00-gpufleet-no-distro-nvidia-driver missing or differs "
            "(the distribution's NVIDIA driver builds are not blocked)",
        ),
        (
            "gpufleet driver | Fabric Manager at the driver's exact version",
            "Fabric Manager is not at the driver's exact version",
        ),
        (
            "gpufleet monitoring | /etc/systemd/system/gpufleet-periodic.service, "
            "gpufleet-periodic.timer: periodic checks' units",
            "/etc/systemd/system/gpufleet-periodic.service or gpufleet-periodic.timer missing "
            "or differs (periodic checks)",
        ),
        ("/srv/x.conf: something else", "/srv/x.conf missing or differs (something else)"),
        ("files.file (path=/etc/x)", "/etc/x missing or differs"),
        ("files.directory (path=/opt/y)", "directory /opt/y missing or differs"),
        (
            "gpufleet monitoring | gpufleet-periodic.timer started",
            "gpufleet-periodic.timer not started",
        ),
        (
            "gpufleet monitoring | /etc/g/e.json: expectations for the periodic checks",
            "/etc/g/e.json differs (what the periodic checks expect)",
        ),
        ("site | something new", "would change: site | something new"),
    ],
)
def test_sentence_for(name, sentence):
    assert sentence_for(name) == sentence


def test_operation_part_and_conditional_sentence():
    assert operation_part("outer | gpufleet driver | x y") == "x y"
    assert conditional_sentence("gpufleet driver | x") == "x: may differ (checked at run time)"


# --- parsing edge cases ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("Traceback (most recent call last):", "something other than its --json plan"),
        ('{"operations": {}}', "no 'plan' list"),
        ('{"plan": [{"name": "x"}]}', "lacks 'hosts_with_change'"),
    ],
)
def test_parse_plan_refuses_what_is_not_a_plan(stdout, message):
    with pytest.raises(DriftError, match=message):
        parse_plan(stdout)


def test_parse_stderr_ignores_debug_lines_and_unknown_names():
    _, run = recorded("gpu_node_fake_fleet")
    events = parse_stderr(run.stderr, ["@fake/gpu-clean", "@fake/gpu-gone"])
    assert events["@fake/gpu-clean"].connected
    assert events["@fake/gpu-clean"].messages == []
    assert events["@fake/gpu-gone"].failed_at == "prepare"
    assert set(events) == {"@fake/gpu-clean", "@fake/gpu-gone"}


def test_nonzero_exit_without_a_named_failure_is_never_clean():
    _, run = recorded("local_present")
    broken = PlanRun(returncode=1, stdout=run.stdout, stderr=run.stderr + "--> pyinfra error: x\n")
    report = build_report(["@local"], broken)
    assert report.hosts["@local"].status == "error"
    assert report.exit_status == 2
    assert "pyinfra error: x" in report.notes[0]


def test_fatal_message_keeps_header_and_end_of_a_long_traceback():
    stderr = "--> Loading config...\n--> pyinfra error: boom\n" + "".join(
        f"  line {i}\n" for i in range(40)
    )
    text = fatal_message(stderr, lines=6).splitlines()
    assert text[0] == "--> pyinfra error: boom"
    assert text[1] == "..."
    assert text[-1] == "  line 39"


def test_validation_is_on_by_default():
    parser = drift_cmd.build_parser()
    assert parser.parse_args(["inv.py"]).validation is True
    assert parser.parse_args(["inv.py", "--no-validation"]).validation is False
    assert parser.parse_args(["inv.py", "--with-validation"]).validation is True


# --- end to end: the real pyinfra CLI against @local ---------------------------------------


def write_local_inventory(folder: Path, probe: Path) -> Path:
    path = folder / "inventory.py"
    path.write_text(f"hosts = [('@local', {{'x_probe_file': {str(probe)!r}}})]\n")
    return path


def drift(capsys, *args: str) -> tuple[int, str, str]:
    status = drift_cmd.main([*args, "--deploy", str(PROBE_DEPLOY), "--no-validation"])
    out, err = capsys.readouterr()
    return status, out, err


def test_e2e_file_present_then_removed(tmp_path, capsys):
    probe = tmp_path / "probe"
    probe.write_text("x")
    inventory = str(write_local_inventory(tmp_path, probe))
    status, out, _ = drift(capsys, inventory)
    assert status == 0, out
    assert "@local  clean" in out
    probe.unlink()
    results_dir = tmp_path / "results"
    status, out, _ = drift(capsys, inventory, "--json", "--results-dir", str(results_dir))
    assert status == 1
    document = json.loads(out)
    assert document["exit_status"] == 1
    assert document["hosts"]["@local"]["status"] == "drift"
    assert document["hosts"]["@local"]["changes"] == [f"{probe} missing or differs"]
    written = read_drift(results_dir / "@local" / "drift.json")
    assert written is not None and written.changes == [f"{probe} missing or differs"]


def test_e2e_unreachable_host(capsys):
    status, out, _ = drift(capsys, str(DRIFT / "inventories" / "unreachable.py"))
    assert status == 3
    assert "127.0.0.1  unreachable" in out
    assert "Could not connect" in out


@pytest.mark.parametrize(
    ("make_inventory", "message"),
    [
        (lambda d: str(d / "no_such_inventory.py"), "does not exist"),
        (lambda d: _written(d / "empty.py", "'''No hosts here.'''\n"), "yields no hosts"),
        (lambda d: str(DRIFT / "inventories" / "local_present.py"), "matches no host"),
    ],
)
def test_e2e_unusable_inventory_is_an_error(tmp_path, capsys, make_inventory, message):
    extra = ["--limit", "gpu-*"] if message == "matches no host" else []
    status, out, err = drift(capsys, make_inventory(tmp_path), *extra)
    assert status == 2
    assert out == ""
    assert message in err


def test_e2e_missing_deploy_file(capsys):
    status = drift_cmd.main(["@local", "--deploy", "/nonexistent/deploy.py", "--no-validation"])
    assert status == 2
    assert "deploy file '/nonexistent/deploy.py' does not exist" in capsys.readouterr().err


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_held_packages_cost_no_round_trip_of_their_own():
    """The per-package "X held" operations read the probe's held section: the recorded plan
    fetches no HeldPackages fact at all (pyinfra's debug log names every fact it gets)."""
    _, run = recorded("gpu_node_fake_fleet")
    assert "Getting fact: gpufleet.stages.host_probe.HostProbe" in run.stderr
    assert "HeldPackages" not in run.stderr
    held_ops = [op["name"] for op in parse_plan(run.stdout) if op["name"].endswith(" held")]
    assert "gpufleet cuda_stack | libnccl2 held" in held_ops


def test_default_deploy_is_this_checkouts_deploy_file():
    assert Path(__file__).resolve().parents[2] / "deploy" / "gpu_node.py" == DEFAULT_DEPLOY
    assert DEFAULT_DEPLOY.is_file()
