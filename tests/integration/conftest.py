"""Fixtures that bring a real sandbox fleet up for a test module and always take it down, and
the session's snapshot of provisioned hosts that most modules start from.

A first deploy takes minutes; most modules only need "a provisioned host". The deploy e2e
provisions three hosts with the real deploy (the behaviour under test) and keeps their disks as
the snapshot `PROVISIONED`; later modules boot hosts on it (`running_sandbox(...,
from_snapshot=...)`) in seconds, each a fresh copy, so one module's tampering never reaches
another. Modules run in `MODULE_ORDER`, the deploy e2e first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.sandbox.image import MARKER, images_dir
from gpufleet.sandbox.state import STATE_DIR, SandboxState, load_state
from tests import pyinfra_cli, quiet

REPO = Path(__file__).resolve().parents[2]
NEEDED_TOOLS = ("systemd-nspawn", "debootstrap", "apt-cacher-ng")
DEPLOY = "deploy/gpu_node.py"


def sandbox_skip_reason() -> str | None:
    """Why the sandbox cannot run here, or None. Only a missing root or tool is a reason."""
    if os.geteuid() != 0:
        return "the sandbox fleet needs root (network namespaces, mounts, systemd-nspawn)"
    missing = [tool for tool in NEEDED_TOOLS if shutil.which(tool) is None]
    if missing:
        return (
            f"sandbox tools missing: {', '.join(missing)} "
            "(apt-get install -y systemd-container debootstrap apt-cacher-ng)"
        )
    return None


@pytest.fixture(autouse=True)
def _needs_sandbox_tools() -> None:
    """Skip where the sandbox cannot run; in CI (CI=true) that is a failure, never a skip."""
    reason = sandbox_skip_reason()
    if reason and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the integration tier, but {reason}")
    if reason:
        pytest.skip(reason)


# The order modules run in: the deploy e2e first (it takes the provisioned snapshot), then the
# modules that boot on it, then those that need bare hosts or a sandbox of their own. A module
# not named here runs last, in file order.
MODULE_ORDER = (
    "test_deploy_e2e",
    "test_cluster_e2e",
    "test_per_rack_e2e",
    "test_calibrate_e2e",
    "test_verdicts_e2e",
    "test_fabric_manager_e2e",
    "test_cluster_srun_e2e",
    "test_slurm_validate_e2e",
    "test_repo_faults_e2e",
    "test_faults_e2e",
    "test_apt_bound_e2e",
    "test_host_loss_e2e",
    "test_slurm_e2e",
    "test_fleet_cache_e2e",
    "test_os_matrix_e2e",
    "test_security_e2e",
    "test_sandbox_lifecycle",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the integration modules in MODULE_ORDER, each module's tests in file order."""

    def rank(item: pytest.Item) -> int:
        module = Path(str(item.fspath)).stem
        if "integration" not in Path(str(item.fspath)).parts:
            return -1  # other tiers keep their place, before this one
        return MODULE_ORDER.index(module) if module in MODULE_ORDER else len(MODULE_ORDER)

    items.sort(key=rank)  # stable: file order within a module


def gpufleet(
    *args: str, timeout: float = 1800, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real `gpufleet` CLI in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"gpufleet {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@dataclass
class Sandbox:
    """A running sandbox as the tests see it, with the figures measured while bringing it up."""

    state: SandboxState
    up_s: float
    image_existed: bool

    def ssh(
        self, host: int | str, command: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` on a host as root over SSH, checking its host key strictly."""
        return subprocess.run(
            self.ssh_command(host, command), capture_output=True, text=True, timeout=timeout
        )

    def ssh_popen(self, host: int | str, command: str) -> subprocess.Popen[str]:
        """Start `command` on a host over SSH and return at once (stdout, stderr piped)."""
        return subprocess.Popen(
            self.ssh_command(host, command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ssh_command(self, host: int | str, command: str) -> list[str]:
        """The ssh command line that runs `command` on a host as root, host key checked."""
        address = self.address(host)
        return [
            "ssh",
            "-i",
            str(STATE_DIR / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={STATE_DIR / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=3",
            f"root@{address}",
            command,
        ]

    def address(self, host: int | str) -> str:
        if isinstance(host, int):
            return self.state.hosts[host].address
        return next(h.address for h in self.state.hosts if h.name == host)


# Identifies one boot of a host: systemd-nspawn mounts a fresh random boot ID into the container
# at each start. (PID 1's start time cannot: the sandbox's time namespace restarts the boot
# clock at each boot, so PID 1 starts at about the same tick every time.)
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


@contextmanager
def running_sandbox(
    hosts: int,
    *,
    standins: bool,
    image: str | None = None,
    slurm: bool = False,
    from_snapshot: str | None = None,
    bare: tuple[str, ...] = (),
    pci_records: dict[str, str] | None = None,
) -> Iterator[Sandbox]:
    """`gpufleet sandbox up` (on `image`, default the sandbox's choice; each host on its disk in
    `from_snapshot`; a host named in `pci_records` on the PCI bus of that recorded listing,
    gpufleet/sandbox/records/pci), yield, then `gpufleet sandbox down` whatever happened."""
    image_existed = any(images_dir().glob(f"*/{MARKER}"))
    args = ["sandbox", "up", "--hosts", str(hosts)] + ([] if standins else ["--no-standins"])
    args += ["--image", image] if image else []
    args += ["--slurm"] if slurm else []
    args += ["--from-snapshot", from_snapshot] if from_snapshot else []
    args += [arg for name in bare for arg in ("--bare", name)]
    args += [
        a for host, name in (pci_records or {}).items() for a in ("--pci-record", f"{host}={name}")
    ]
    gpufleet("sandbox", "down", timeout=300)  # a sandbox left by someone else is not timed
    started = time.monotonic()
    try:
        gpufleet(*args)
        up_s = time.monotonic() - started
        yield Sandbox(load_state(), up_s, image_existed)
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)


# The snapshot of three hosts provisioned by the real deploy with the sandbox inventory.
PROVISIONED = "tests-provisioned"
PROVISIONED_HOSTS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
_taken: list[str] = []


def keep_provisioned(hosts: tuple[str, ...] = PROVISIONED_HOSTS) -> str:
    """Snapshot the running sandbox's `hosts`, just provisioned, as PROVISIONED (each reboots
    once, onto the snapshot); later modules of this session boot on it."""
    gpufleet("sandbox", "forget", PROVISIONED, check=False)  # an earlier session's
    gpufleet("sandbox", "snapshot", PROVISIONED, *(a for h in hosts for a in ("--host", h)))
    _taken.append(PROVISIONED)
    return PROVISIONED


def first_deploy(inventory: str | Path = "inventories/sandbox.py", *args: str) -> None:
    """The real pyinfra CLI runs the deploy on every host of the inventory; fails with its log."""
    proc = pyinfra_cli.deploy(inventory, *args)
    assert proc.returncode == 0, pyinfra_cli.failure(proc)


@pytest.fixture(scope="session")
def provisioned() -> str:
    """The name of the session's provisioned snapshot; made here (three hosts, the real first
    deploy) only when the deploy e2e has not made it already."""
    if PROVISIONED not in _taken:
        with running_sandbox(len(PROVISIONED_HOSTS), standins=True):
            first_deploy("inventories/sandbox.py", "--parallel", "3")
            keep_provisioned()
    return PROVISIONED


@pytest.fixture
def quiet_machine() -> Iterator[None]:
    """The test measures (the cluster tier judges links by iperf3): no sandbox-free test runs
    on this machine meanwhile (tests/quiet.py). Only for tests whose verdicts are speeds."""
    with quiet.exclusive():
        yield


@pytest.fixture(scope="session", autouse=True)
def _forget_snapshots() -> Iterator[None]:
    """Snapshots hold this code's deploy: none outlives the session that took it."""
    yield
    for name in _taken:
        gpufleet("sandbox", "forget", name, check=False)
