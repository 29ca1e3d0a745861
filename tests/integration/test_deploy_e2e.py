"""The real `pyinfra` CLI provisions sandbox hosts over SSH: the deploy end to end.

Three hosts are provisioned in parallel while a fourth, declared a GPU server although it has
no GPU, is refused by preflight. Then the hosts are inspected with testinfra over SSH, a second
run must change nothing and the one after it plan nothing (deploy stamps, issue 18),
`gpufleet validate` must pass on them (issue 5), the periodic units
must verify and publish results and metrics, `gpufleet drift` must name tampering host by host
and clear after a re-provision (issue 6), and a branch change with `reboot: always` must
reboot the host and carry on. The tests run in file order and share the hosts.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import testinfra
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.report.schema import validate_results
from gpufleet.sandbox.inventory import group_data
from gpufleet.sandbox.state import STATE_DIR
from gpufleet.spec import NodeSpec
from gpufleet.stages import monitoring
from gpufleet.validate import baseline
from tests import pyinfra_cli
from tests.integration.conftest import (
    BOOT_ID,
    Sandbox,
    gpufleet,
    keep_provisioned,
    running_sandbox,
)
from tests.integration.deploy_helpers import (
    GOOD,
    KEYRING,
    NOUVEAU_BLACKLIST,
    REFUSED,
    SOURCES,
    UNATTENDED_UPGRADES,
    Run,
    drift_args,
    driver_branch_problems,
    pyinfra,
    validate,
)
from validation.verdicts.tiers import QUICK_WORKLOADS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(4, standins=True) as running:
        yield running


@pytest.fixture(scope="module")
def first_run(sandbox: Sandbox) -> Run:
    """The first deploy; its three provisioned hosts become the session's provisioned snapshot
    (each reboots once onto it), which later modules boot their hosts on."""
    run = pyinfra("--parallel", "4")
    print(f"\nfirst deploy, 3 hosts + 1 refused: {run.wall_s:.1f} s")
    provisioned = all(run.ops_touching(good) for good in GOOD)
    if provisioned and all(set(failed) <= {REFUSED} for failed in run.errors().values()):
        keep_provisioned(GOOD)
    return run


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The control node's results directory, shared by the validation and drift tests."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def spec(sandbox: Sandbox) -> NodeSpec:
    """The spec the deploy sees for the good hosts (same group data, same defaults)."""
    return NodeSpec.from_host_data(group_data(sandbox.state))


def host(sandbox: Sandbox, name: str) -> Any:
    """A testinfra host over SSH, checking the host key strictly."""
    extra = f"-o UserKnownHostsFile={STATE_DIR / 'known_hosts'} -o StrictHostKeyChecking=yes"
    return testinfra.get_host(
        f"ssh://root@{sandbox.address(name)}",
        ssh_identity_file=str(STATE_DIR / "id_ed25519"),
        ssh_extra_args=extra,
    )


def test_three_hosts_provisioned_in_parallel_and_the_fourth_refused(first_run: Run) -> None:
    assert "no NVIDIA GPU on the PCI bus" in first_run.log
    refusal = [line for line in first_run.log.splitlines() if "refused" in line]
    assert refusal and all(REFUSED in line for line in refusal), refusal
    for name, failed in first_run.errors().items():
        assert set(failed) <= {REFUSED}, f"{name} failed on {failed}\n{first_run.log[-4000:]}"
    for good in GOOD:
        assert first_run.ops_touching(good), f"{good} was not provisioned"
    assert not first_run.ops_touching(REFUSED)


@pytest.mark.parametrize("name", GOOD)
def test_keyring_and_signed_sources(first_run: Run, sandbox: Sandbox, name: str) -> None:
    node = host(sandbox, name)
    assert node.file(KEYRING).is_file
    keys = node.check_output(f"gpg --show-keys --with-colons {KEYRING}")
    assert f"fpr:::::::::{sandbox.state.nvidia_repo_key_fingerprint}:" in keys
    sources = node.file(SOURCES).content_string
    assert f"Signed-By: {KEYRING}" in sources
    assert "trusted=yes" not in sources.lower()
    assert sandbox.state.nvidia_repo_url in sources


@pytest.mark.parametrize("name", GOOD)
def test_packages_pinned_and_held_at_resolved_versions(
    first_run: Run, sandbox: Sandbox, spec: NodeSpec, name: str
) -> None:
    node = host(sandbox, name)
    resolution = spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=())
    # The sandbox inventory sets dcgm: on (its hosts have no data-centre GPU for auto).
    pinned = resolution.cudnn_packages + resolution.nccl_packages + resolution.dcgm_packages
    for package_spec in pinned:
        package, version = package_spec.split("=", 1)
        assert node.package(package).is_installed, package
        assert node.package(package).version == version, package
    held = set(node.check_output("apt-mark showhold").split())
    assert {p.split("=", 1)[0] for p in pinned} <= held
    assert resolution.pinning_package is not None
    assert node.package(resolution.pinning_package).is_installed
    for package in resolution.driver_packages:
        assert node.package(package).version.startswith(resolution.driver_version), package
    assert node.package(resolution.cuda_toolkit_package).is_installed


@pytest.mark.parametrize("name", GOOD)
def test_nouveau_and_unattended_upgrades_blacklisted(
    first_run: Run, sandbox: Sandbox, name: str
) -> None:
    node = host(sandbox, name)
    assert "blacklist nouveau" in node.file(NOUVEAU_BLACKLIST).content_string
    unattended = node.file(UNATTENDED_UPGRADES).content_string
    for prefix in ("nvidia-", "libnvidia-", "cuda-", "libcudnn", "libnccl"):
        assert prefix in unattended


@pytest.mark.parametrize("name", GOOD)
def test_environment_imports_tensorflow(
    first_run: Run, sandbox: Sandbox, spec: NodeSpec, name: str
) -> None:
    node = host(sandbox, name)
    version = node.check_output(
        f"{spec.python_bin} -c 'import tensorflow as tf; print(tf.__version__)'"
    )
    assert version.strip().splitlines()[-1] == spec.tf_version


@pytest.mark.parametrize("name", GOOD)
def test_validation_payload_installed(
    first_run: Run, sandbox: Sandbox, spec: NodeSpec, name: str
) -> None:
    node = host(sandbox, name)
    current = f"{spec.payload_dir}/current"
    assert node.file(current).is_symlink
    assert node.file(f"{current}/validation/workloads").is_directory
    # The environment's Python runs the suite from there.
    imported = node.run(f"cd / && PYTHONPATH={current} {spec.python_bin} -c 'import validation'")
    assert imported.rc == 0, imported.stderr


@pytest.mark.parametrize("name", GOOD)
def test_services_and_timers_enabled_and_running(
    first_run: Run, sandbox: Sandbox, name: str
) -> None:
    node = host(sandbox, name)
    for unit in ("nvidia-persistenced.service", "nvidia-dcgm.service", "gpufleet-periodic.timer"):
        service = node.service(unit)
        assert service.is_enabled, f"{unit} not enabled on {name}"
        assert service.is_running, f"{unit} not running on {name}"
    # No unit may have failed: the sandbox's own units no longer fail at boot (each host's
    # systemd has a cgroup of its own, gpufleet/sandbox/cgroups.py), so any failure counts.
    failed = node.run("systemctl --failed --no-legend --plain").stdout.split("\n")
    assert [line for line in failed if line.strip()] == [], node.run(
        "journalctl -p err -b --no-pager | tail -n 20"
    ).stdout


def test_refused_host_left_untouched(first_run: Run, sandbox: Sandbox) -> None:
    node = host(sandbox, REFUSED)
    assert not node.file(KEYRING).exists
    assert not node.file(SOURCES).exists


def test_second_run_changes_nothing(first_run: Run) -> None:
    run = pyinfra("--dry", "--parallel", "4")
    print(f"\nidempotent --dry --json, 3 hosts + 1 refused: {run.wall_s:.1f} s")
    changing = {
        op["name"]: op["hosts_with_change"] for op in run.report["plan"] if op["hosts_with_change"]
    }
    assert changing == {}


def test_the_run_after_one_that_changed_nothing_plans_nothing(first_run: Run) -> None:
    """Issue 18: the --dry run above changed nothing and left each host a deploy stamp; this
    one reads each host's stamped facts again with its probe, in one round trip, and plans no
    operation there. The refused host is refused again (a failed host is never stamped)."""
    run = pyinfra("--dry", "--parallel", "4")
    print(f"\nstamped --dry --json, 3 hosts + 1 refused: {run.wall_s:.1f} s")
    stamped = r"\s+gpufleet plan: .*; unchanged \(deploy stamp\)$"
    for name in GOOD:
        assert re.search(rf"\[{name}\]{stamped}", run.log, re.M), run.log[-4000:]
        assert run.ops_touching(name) == []
    assert re.search(rf"\[{REFUSED}\]\s+gpufleet preflight refused this host", run.log)
    assert not re.search(rf"\[{REFUSED}\]{stamped}", run.log, re.M)


def test_a_unit_stopped_after_the_stamp_is_planned_again(first_run: Run, sandbox: Sandbox) -> None:
    """The stamp's replay reads every unit in one `systemctl show` and its environment check
    through a witness (gpufleet.stamp.merged, gpufleet.operations.env_check): a timer stopped
    by hand makes that host's stamp read differently, and its plan starts the timer again; the
    other hosts stay stamped."""
    stopped = GOOD[0]
    assert sandbox.ssh(stopped, f"systemctl stop {monitoring.TIMER}").returncode == 0
    try:
        run = pyinfra("--dry", "--parallel", "4")
        stamped = r"\s+gpufleet plan: .*; unchanged \(deploy stamp\)$"
        assert not re.search(rf"\[{stopped}\]{stamped}", run.log, re.M), run.log[-4000:]
        assert [op for op in run.ops_touching(stopped) if monitoring.TIMER in op], run.log[-4000:]
        for name in GOOD[1:]:
            assert re.search(rf"\[{name}\]{stamped}", run.log, re.M), run.log[-4000:]
    finally:
        sandbox.ssh(stopped, f"systemctl start {monitoring.TIMER}")


def test_quick_validation_passes_on_the_provisioned_hosts(
    first_run: Run, results_dir: Path
) -> None:
    """Issue 5 acceptance: `gpufleet validate --tier quick` over SSH on the provisioned hosts."""
    proc = validate(results_dir, "quick")
    assert proc.returncode == 0, pyinfra_cli.failure(proc)
    run_id = re.search(r"results: .*/\*/(\S+)\.json", proc.stdout)
    assert run_id, proc.stdout[-2000:]
    for name in GOOD:
        doc = json.loads((results_dir / name / f"{run_id.group(1)}.json").read_text())
        validate_results(doc)
        assert (doc["host"], doc["tier"], doc["status"]) == (name, "quick", "pass")
        checks = {c["name"]: c for c in doc["checks"]}
        gpu_checks = [c for n, c in checks.items() if n.startswith("gpu_health::")]
        assert gpu_checks
        # DCGM is installed here (dcgm: on) but there is no GPU for it: skipped, never passed.
        gpu_checks.append(checks["vendor_diagnostics::dcgm_diag"])
        for check in gpu_checks:
            assert check["status"] == "skipped", check
            assert "no NVIDIA GPU on the PCI bus" in check["message"], check
        assert all(c["message"] for c in checks.values() if c["status"] == "skipped")
        for workload in QUICK_WORKLOADS:
            assert checks[f"workloads::{workload}"]["status"] == "pass", checks
        ran = {w["workload"]: {d["type"] for d in w["devices"]} for w in doc["workloads"]}
        assert ran == {w: {"CPU"} for w in QUICK_WORKLOADS}, ran  # the CPU-only build ran
    junit = ET.parse(results_dir / "junit" / f"{run_id.group(1)}.xml").getroot()
    suites = {s.get("name"): s for s in junit.iter("testsuite")}
    assert sorted(suites) == sorted(GOOD)
    for suite in suites.values():
        assert int(suite.get("tests", 0)) > 0
        assert (suite.get("failures"), suite.get("errors")) == ("0", "0")


def test_periodic_units_verify_and_one_run_publishes_results_and_metrics(
    first_run: Run, sandbox: Sandbox, spec: NodeSpec
) -> None:
    """Issue 6 acceptance: the units pass `systemd-analyze verify` on a host; one run of the
    service writes a results document and a .prom that Prometheus' parser reads."""
    name = GOOD[2]
    units = f"{monitoring.UNIT_DIR}/{monitoring.TIMER} {monitoring.UNIT_DIR}/{monitoring.SERVICE}"
    verify = sandbox.ssh(name, f"systemd-analyze verify {units}")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "gpufleet-periodic" not in verify.stdout + verify.stderr  # no warning about ours
    started = sandbox.ssh(name, f"systemctl start {monitoring.SERVICE}", timeout=900)
    journal = sandbox.ssh(name, f"journalctl -u {monitoring.SERVICE} --no-pager | tail -n 20")
    assert started.returncode == 0, started.stderr + journal.stdout
    doc = json.loads(sandbox.ssh(name, f"cat {monitoring.STATE_DIR}/latest.json").stdout)
    validate_results(doc)
    assert (doc["host"], doc["tier"], doc["status"]) == (name, "quick", "pass")
    stored = sandbox.ssh(name, f"cat {spec.results_dir}/{doc['run_id']}.json")
    assert json.loads(stored.stdout) == doc
    prom = sandbox.ssh(name, f"cat {spec.textfile_dir}/gpufleet.prom").stdout
    families = {f.name: f.samples for f in text_string_to_metric_families(prom)}
    assert families["gpufleet_run_success"][0].value == 1
    assert families["gpufleet_last_success_timestamp_seconds"][0].value > 0
    passed = {s.labels["check"]: s.value for s in families["gpufleet_check_passed"]}
    assert passed.get("workloads::resnet50") == 1, passed  # a quick-tier workload
    # node_exporter's textfile collector serves them.
    scraped = sandbox.ssh(name, "curl -fsS http://127.0.0.1:9100/metrics")
    assert "gpufleet_run_success" in scraped.stdout, scraped.stderr


def test_drift_names_tampering_host_by_host_and_clears_after_reprovisioning(
    first_run: Run, sandbox: Sandbox, results_dir: Path, spec: NodeSpec
) -> None:
    """Issue 6 acceptance: the baseline the quick validation above wrote, two hosts tampered
    with two ways, drift exits 1 naming each change on its host only; re-provision; drift
    exits 0.

    The quick tier, which drift itself runs: the full tier's workloads on three hosts sharing
    two cores took 190 s of CI's time here and prove nothing drift reads (the full tier runs
    end to end in test_calibrate_e2e and test_verdicts_e2e)."""
    # The quick tier above passed on these hosts into the same results folder: its run
    # started (or joined) each host's baseline of its tier, which drift compares with.
    for name in GOOD:
        path = baseline.baseline_path(results_dir, name, "quick")
        assert baseline.load_baseline(path) is not None
    resolution = spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=())
    held_package = resolution.nccl_packages[0].split("=", 1)[0]
    tamper = {
        "gfsb-h1": f"apt-mark unhold {held_package}",
        "gfsb-h2": f"echo '# local edit' >> {NOUVEAU_BLACKLIST}",
    }
    for name, command in tamper.items():
        assert sandbox.ssh(name, command).returncode == 0
    drifted = gpufleet(*drift_args(results_dir), check=False, timeout=900)
    assert drifted.returncode == 1, drifted.stdout[-4000:] + drifted.stderr[-3000:]
    hosts = json.loads(drifted.stdout)["hosts"]
    assert hosts["gfsb-h1"]["changes"] == [f"{held_package} no longer held"], hosts
    assert hosts["gfsb-h2"]["changes"] == [
        f"{NOUVEAU_BLACKLIST} differs (nouveau not blacklisted)"
    ], hosts
    assert hosts["gfsb-h3"] == {**hosts["gfsb-h3"], "status": "clean", "changes": []}, hosts
    assert not hosts["gfsb-h3"]["validation_failures"] + hosts["gfsb-h2"]["validation_failures"]

    again = pyinfra("--limit", "gfsb-h1", "--limit", "gfsb-h2")
    assert again.errors() == {}, again.log[-4000:]
    # The plan alone: re-provisioning mends what the plan names, and the quick tier above
    # already passed on these hosts (40 s of CI saved).
    clean = gpufleet(*drift_args(results_dir), "--no-validation", check=False, timeout=900)
    assert clean.returncode == 0, clean.stdout[-4000:] + clean.stderr[-3000:]
    assert {h["status"] for h in json.loads(clean.stdout)["hosts"].values()} == {"clean"}


def test_tampering_shows_up_host_by_host(first_run: Run, sandbox: Sandbox, spec: NodeSpec) -> None:
    resolution = spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=())
    held_package = resolution.nccl_packages[0].split("=", 1)[0]
    tamper = {
        "gfsb-h1": f"apt-mark unhold {held_package}",
        "gfsb-h2": f"echo '// local edit' >> {UNATTENDED_UPGRADES}",
        "gfsb-h3": f"rm -rf {spec.env_dir}",
    }
    for name, command in tamper.items():
        assert sandbox.ssh(name, command).returncode == 0
    run = pyinfra("--dry", "--parallel", "4")
    touched = {name: run.ops_touching(name) for name in GOOD}
    holds = [op for op in touched["gfsb-h1"] if re.search(r"\bh[eo]ld\b", op)]
    assert holds, touched
    assert any("unattended" in op for op in touched["gfsb-h2"]), touched
    assert any("environment" in op or "TensorFlow" in op for op in touched["gfsb-h3"]), touched
    # Each tampering shows on its own host only.
    assert not any("unattended" in op for op in touched["gfsb-h1"] + touched["gfsb-h3"])
    assert not any(op in holds for op in touched["gfsb-h2"] + touched["gfsb-h3"])


def test_branch_change_with_reboot_always(first_run: Run, sandbox: Sandbox) -> None:
    name = "gfsb-h1"
    node = host(sandbox, name)
    to_570 = pyinfra("--limit", name, "--data", "driver_branch=570")
    assert to_570.errors() == {}, to_570.log[-4000:]
    # Checked at the end, so that the reboot path below runs even when this leg is off.
    problems = driver_branch_problems(node, sandbox, 570, other=580)
    boot_before = sandbox.ssh(name, BOOT_ID).stdout.strip()

    to_580 = pyinfra("--limit", name, "--data", "driver_branch=580", "--data", "reboot=always")
    print(f"\nbranch change 570 -> 580 with reboot: {to_580.wall_s:.1f} s")
    assert to_580.errors() == {}, to_580.log[-4000:]
    boot_after = sandbox.ssh(name, BOOT_ID).stdout.strip()
    assert boot_after != boot_before, "the host did not reboot"
    # The reboot comes last (one host's reboot wait holds no other host at an earlier stage):
    # every stage ran on the host before it, and nothing follows it.
    results = to_580.report["results"]["operations"]
    reboot_at = next(i for i, op in enumerate(results) if "reboot" in op["name"])
    before = results[:reboot_at]
    assert any("python_env" in op["name"] for op in before), [op["name"] for op in before]
    assert all(name in op["success"] + op["no_change"] for op in before)
    assert results[reboot_at + 1 :] == []
    problems += driver_branch_problems(node, sandbox, 580, other=570)
    assert problems == []
