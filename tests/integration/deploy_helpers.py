"""What the deploy e2e tests share: the sandbox's hosts, the real pyinfra CLI with JSON output,
`gpufleet validate` and `gpufleet drift` on the good hosts, and the driver-branch check."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.sandbox.inventory import REFUSE_ENV, group_data
from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import DRIVER_MARKER
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, gpufleet

GOOD = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
REFUSED = "gfsb-h4"
INVENTORY = "inventories/sandbox.py"
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
    """The real pyinfra CLI with JSON output against the sandbox inventory, `refuse` refused."""
    started = time.monotonic()
    proc = pyinfra_cli.deploy(
        INVENTORY, "--json", *args, env={REFUSE_ENV: refuse}, timeout=DEPLOY_TIMEOUT_S
    )
    wall = time.monotonic() - started
    return Run(proc.returncode, pyinfra_cli.json_of(proc), proc.stderr, wall)


def validate(results: Path, tier: str) -> subprocess.CompletedProcess[str]:
    """`gpufleet validate` on the good hosts (the refused one was never provisioned)."""
    limits = [arg for name in GOOD for arg in ("--limit", name)]
    started = time.monotonic()
    proc = gpufleet(
        "validate",
        INVENTORY,
        "--tier",
        tier,
        "--results-dir",
        str(results),
        *limits,
        check=False,
        timeout=1800,
    )
    print(f"\nvalidate --tier {tier}, {len(GOOD)} hosts: {time.monotonic() - started:.1f} s")
    return proc


def drift_args(results: Path) -> list[str]:
    limits = [arg for name in GOOD for arg in ("--limit", name)]
    return ["drift", INVENTORY, "--json", "--results-dir", str(results), *limits]


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
