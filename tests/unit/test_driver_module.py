"""The NVIDIA module for the running kernel (review finding 4): a host whose driver packages
are installed but whose kernel has no module is rebuilt with DKMS, or fails with dkms status."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import OperationError

from gpufleet.operations import dkms
from gpufleet.stages.host_probe import HostState
from gpufleet.stamp.canonical import digest
from tests import pyinfra_cli
from tests.unit.fake_fleet import FakeGpuHost, write_inventory

REBUILD = (
    "gpufleet driver | NVIDIA 580 module built for the running kernel 5.15.0-92-generic (DKMS)"
)


def test_a_host_booted_into_a_kernel_without_the_module_plans_the_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_STAMP_DIR", str(tmp_path / "stamps"))
    hosts = {
        "no-module": FakeGpuHost(provisioned=True, kernel="5.15.0-92-generic", module_missing=True),
        "fine": FakeGpuHost(provisioned=True, kernel="5.15.0-92-generic"),
        "fresh": FakeGpuHost(kernel="5.15.0-92-generic"),  # installs: the package builds it
        "gpu-less": FakeGpuHost(  # no GPU to drive (the sandbox's containers): left alone
            provisioned=True, gpus=(), module_missing=True, inventory={"gpu_less": True}
        ),
    }
    done, plan = pyinfra_cli.plan(write_inventory(tmp_path / "inventory.py", hosts))
    assert done.returncode == 0, done.stderr[-3000:]
    changes = {op["name"]: op["hosts_with_change"] for op in plan}
    assert changes.get(REBUILD) == ["@fake/no-module"]
    assert not any(
        "@fake/no-module" in hosts_ for name, hosts_ in changes.items() if name != REBUILD
    ), "nothing else changes on that host: the rebuild is what repairs it"


def test_the_missing_module_is_a_stamp_input() -> None:
    # The probe's state is part of what a stamp's inputs digest covers (stamp/inputs.py).
    with_module = HostState(kernel="5.15.0-92-generic", installed_module="580.173.02")
    without = dataclasses.replace(with_module, installed_module=None)
    assert digest(with_module) != digest(without)


def test_module_missing_reads_the_branch() -> None:
    assert dkms.module_missing(None, 580)
    assert dkms.module_missing("570.195.03", 580)
    assert not dkms.module_missing("580.173.02", 580)


def test_a_kernel_release_that_is_not_one_is_refused() -> None:
    with pytest.raises(OperationError, match="not a kernel release"):
        dkms.rebuild_script("5.15; reboot", 580)


def _fake_tools(folder: Path, builds: bool) -> dict[str, str]:
    """modinfo that finds the module once dkms built it; dkms that builds it or fails."""
    built = folder / "built"
    (folder / "modinfo").write_text(f"#!/bin/sh\n[ -e {built} ] && echo 580.173.02\nexit 0\n")
    action = f"touch {built}" if builds else "echo 'Error! Bad return status' >&2; exit 10"
    (folder / "dkms").write_text(
        "#!/bin/sh\n"
        f'echo "dkms $*" >> {folder / "calls"}\n'
        'if [ "$1" = status ]; then echo "nvidia/580.173.02: added"; exit 0; fi\n'
        f"{action}\n"
    )
    for tool in ("modinfo", "dkms"):
        (folder / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:/usr/bin:/bin"}


@pytest.mark.parametrize("builds", [True, False])
def test_the_rebuild_builds_for_that_kernel_or_fails_with_dkms_status(
    tmp_path: Path, builds: bool
) -> None:
    env = _fake_tools(tmp_path, builds)
    script = dkms.rebuild_script("5.15.0-92-generic", 580)
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "dkms autoinstall -k 5.15.0-92-generic"
    if builds:
        assert done.returncode == 0, done.stderr
        assert calls == ["dkms autoinstall -k 5.15.0-92-generic"]
    else:
        assert done.returncode == 1
        assert "no NVIDIA 580 module for kernel 5.15.0-92-generic" in done.stderr
        assert "nvidia/580.173.02: added" in done.stderr  # dkms status, shown
    again = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert (again.returncode == 0) == builds  # once built, a second run does nothing
    if builds:
        assert len((tmp_path / "calls").read_text().splitlines()) == 1
