"""The real `pyinfra` CLI provisions sandbox hosts over SSH: the deploy end to end.

Three hosts are provisioned in parallel while a fourth, declared a GPU server although it has
no GPU, is refused by preflight. Then the hosts are inspected with testinfra over SSH, a second
run must change nothing, tampering must show up host by host, and a branch change with
`reboot: always` must reboot the host and carry on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import testinfra

from gpufleet.sandbox.inventory import REFUSE_ENV, group_data
from gpufleet.sandbox.state import STATE_DIR
from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import DRIVER_MARKER
from tests.integration.conftest import REPO, Sandbox, running_sandbox

pytestmark = pytest.mark.integration

GOOD = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
REFUSED = "gfsb-h4"
INVENTORY = "inventories/sandbox.py"
DEPLOY = "deploy/gpu_node.py"
DEPLOY_TIMEOUT_S = 1800
# Paths the deploy manages (gpufleet/stages/*): checked here as a user would check a server.
KEYRING = "/usr/share/keyrings/gpufleet-nvidia-cuda.gpg"
SOURCES = "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
NOUVEAU_BLACKLIST = "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"
UNATTENDED_UPGRADES = "/etc/apt/apt.conf.d/51gpufleet-unattended-upgrades"


@dataclass
class Run:
    """One `pyinfra ... --json` run: exit status, parsed JSON, stderr (the log), wall time."""

    returncode: int
    report: dict[str, Any]
    log: str
    wall_s: float

    def ops_touching(self, host: str) -> list[str]:
        """Names of operations that changed (or, in a dry run, would change) `host`."""
        names = []
        if self.report.get("results"):
            for op in self.report["results"]["operations"]:
                if host in op["success"]:
                    names.append(op["name"])
        else:
            for op in self.report["plan"]:
                if host in op["hosts_with_change"] + op["hosts_with_conditional_change"]:
                    names.append(op["name"])
        return names

    def errors(self) -> dict[str, list[str]]:
        """Operation name -> hosts it failed on (real runs only)."""
        ops = (self.report.get("results") or {}).get("operations", [])
        return {op["name"]: op["error"] for op in ops if op["error"]}

    def hosts_in_results(self) -> set[str]:
        ops = (self.report.get("results") or {}).get("operations", [])
        return {h for op in ops for h in op["success"] + op["no_change"] + op["error"]}


def pyinfra(*args: str, refuse: str = REFUSED) -> Run:
    """Run the real pyinfra CLI with JSON output against the sandbox inventory."""
    env = dict(os.environ, **{REFUSE_ENV: refuse})
    # `-y` also turns pyinfra's change detection off (State(check_for_changes=not yes)), and a
    # dry run without it reports no change at all: dry runs go without `-y`.
    confirm = [] if "--dry" in args else ["-y"]
    command = [str(Path(sys.executable).with_name("pyinfra")), *confirm, "--json", *args]
    started = time.monotonic()
    proc = subprocess.run(
        [*command, INVENTORY, DEPLOY],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEPLOY_TIMEOUT_S,
    )
    wall = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"pyinfra {' '.join(args)} printed no JSON (exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        ) from None
    return Run(proc.returncode, report, proc.stderr, wall)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(4, standins=True) as running:
        yield running


@pytest.fixture(scope="module")
def first_run(sandbox: Sandbox) -> Run:
    run = pyinfra("--parallel", "4")
    print(f"\nfirst deploy, 3 hosts + 1 refused: {run.wall_s:.1f} s")
    return run


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
    pinned = resolution.cudnn_packages + resolution.nccl_packages
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
    for unit in ("nvidia-persistenced.service", "gpufleet-periodic.timer"):
        service = node.service(unit)
        assert service.is_enabled, f"{unit} not enabled on {name}"
        assert service.is_running, f"{unit} not running on {name}"
    assert node.check_output("systemctl is-system-running") == "running"


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


def driver_branch_problems(node: Any, sandbox: Sandbox, branch: int, other: int) -> list[str]:
    """How the host differs from running `branch` as the deploy resolves it, with nothing of
    `other` left (empty when it matches)."""

    def resolved(on: int) -> Any:
        data = {**group_data(sandbox.state), "driver_branch": on}
        return NodeSpec.from_host_data(data).resolve(
            os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=()
        )

    wanted, unwanted = resolved(branch), resolved(other)
    problems = []
    recorded = node.file(DRIVER_MARKER).content_string.strip()
    if recorded != str(branch):
        problems.append(f"{DRIVER_MARKER} says {recorded!r}, not {branch}")
    for package in wanted.driver_packages:
        version = node.package(package).version if node.package(package).is_installed else None
        if not (version or "").startswith(wanted.driver_version):
            problems.append(f"{package} is {version}, not {wanted.driver_version}")
    for package in set(unwanted.driver_packages) - set(wanted.driver_packages):
        if node.package(package).is_installed:
            problems.append(f"{package} of branch {other} remains")
    listing = node.run(
        "dpkg-query -W -f '${Package} ${db:Status-Status}\\n' 'nvidia-driver-pinning-*'"
    )
    pinning = {
        line.split()[0] for line in listing.stdout.splitlines() if line.endswith(" installed")
    }
    # A pinning package of another branch would pull the host back to that branch.
    expected = {wanted.pinning_package} if wanted.pinning_package else set()
    if pinning != expected:
        problems.append(
            f"branch {branch}: pinning packages {sorted(pinning)}, not {sorted(expected)}"
        )
    return problems


def test_branch_change_with_reboot_always(first_run: Run, sandbox: Sandbox) -> None:
    name = "gfsb-h1"
    node = host(sandbox, name)
    to_570 = pyinfra("--limit", name, "--data", "driver_branch=570")
    assert to_570.errors() == {}, to_570.log[-4000:]
    # Checked at the end, so that the reboot path below runs even when this leg is off.
    problems = driver_branch_problems(node, sandbox, 570, other=580)
    boot_before = sandbox.ssh(name, "cut -d' ' -f22 /proc/1/stat").stdout.strip()

    to_580 = pyinfra("--limit", name, "--data", "driver_branch=580", "--data", "reboot=always")
    print(f"\nbranch change 570 -> 580 with reboot: {to_580.wall_s:.1f} s")
    assert to_580.errors() == {}, to_580.log[-4000:]
    boot_after = sandbox.ssh(name, "cut -d' ' -f22 /proc/1/stat").stdout.strip()
    assert boot_after != boot_before, "the host did not reboot"
    # The deploy carried on after the reboot: the stages after the driver ran on the host.
    results = to_580.report["results"]["operations"]
    reboot_at = next(i for i, op in enumerate(results) if "reboot" in op["name"])
    after = results[reboot_at + 1 :]
    assert after and all(name in op["success"] + op["no_change"] for op in after)
    problems += driver_branch_problems(node, sandbox, 580, other=570)
    assert problems == []
