"""gpufleet.facts: pyinfra-testing fixtures (tests/facts), and every fact's command run for real
on this machine, which must give the "no GPU" answers on a host without one.

Importing pyinfra_testing imports pyinfra_cli, which monkey-patches the process with gevent.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import FactBase, StringCommand
from pyinfra.api.exceptions import FactProcessError
from pyinfra_testing.facts import make_fact_tests

from gpufleet import facts
from gpufleet.parsers.pci import PciDevice
from gpufleet.parsers.system import NvccVersion

FACT_FIXTURES = Path(__file__).resolve().parents[1] / "facts"
FACT_NAMES = sorted(
    name
    for name, obj in vars(facts).items()
    if inspect.isclass(obj) and issubclass(obj, FactBase) and obj.__module__ == facts.__name__
)

for _folder in sorted(FACT_FIXTURES.glob("gpufleet.facts.*")):
    _fact = _folder.name.rsplit(".", 1)[1]
    globals()[f"TestFixtures{_fact}"] = make_fact_tests("gpufleet", f"facts.{_fact}", _folder)


def test_every_fact_has_fixtures():
    missing = [
        name
        for name in FACT_NAMES
        if not list((FACT_FIXTURES / f"gpufleet.facts.{name}").glob("*.json"))
    ]
    assert not missing


# --- the commands, run for real ----------------------------------------------------------------


def run_fact(fact_class: type[FactBase], env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """Run a fact's command with sh and process it the way pyinfra does."""
    fact = fact_class()
    command = StringCommand(fact.command(**kwargs)).get_raw_value()
    result = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=30, env=env, check=False
    )
    assert result.returncode == 0, (command, result.stderr)
    lines = result.stdout.splitlines()
    # pyinfra calls process() only when the command printed something.
    return fact.process(lines) if lines else fact.default()


def host_has_nvidia_gpu() -> bool:
    if Path("/proc/driver/nvidia").exists():
        return True
    vendors = Path("/sys/bus/pci/devices").glob("*/vendor")
    return any(path.read_text().strip() == "0x10de" for path in vendors)


gpu_less = pytest.mark.skipif(
    host_has_nvidia_gpu(), reason="checks the no-GPU answers; this host has an NVIDIA GPU"
)


@gpu_less
@pytest.mark.parametrize(
    ("fact_name", "kwargs", "expected"),
    [
        ("NvidiaPciDevices", {}, []),
        ("LoadedNvidiaDriver", {}, None),
        ("InstalledNvidiaDriver", {}, None),
        ("NvidiaSmiQuery", {"fields": ["name", "driver_version"]}, None),
        ("GpuProcesses", {}, []),
        ("NouveauLoaded", {}, False),
    ],
)
def test_gpu_facts_on_a_host_without_gpu(fact_name, kwargs, expected):
    assert run_fact(getattr(facts, fact_name), **kwargs) == expected


def test_secure_boot_on_this_host():
    # Expected from the EFI variable itself (fifth byte); None where there is none to read,
    # as on the dev machine and CI VMs, which boot without EFI variables.
    efivar = Path(facts._SECURE_BOOT_EFIVAR)
    expected = efivar.read_bytes()[4] == 1 if os.access(efivar, os.R_OK) else None
    assert run_fact(facts.SecureBootState) is expected


def test_dkms_status_on_this_host():
    result = run_fact(facts.DkmsStatus)
    if shutil.which("dkms", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None:
        assert result == []
    else:
        assert all(entry.status for entry in result)


def test_cuda_toolkit_version_on_this_host():
    result = run_fact(facts.CudaToolkitVersion)
    nvcc = "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        assert result is None
        return
    banner = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    release = re.search(r"release (\d+\.\d+)", banner)
    assert release is not None
    assert isinstance(result, NvccVersion)
    assert result.release == release[1]


@pytest.mark.parametrize("path", ["/", "/nonexistent/gpufleet/env", "/tmp/it's a dir/$(id)"])
def test_free_disk_bytes_walks_up_to_an_existing_directory(path):
    result = run_fact(facts.FreeDiskBytes, path=path)
    existing = Path(path)
    while not existing.exists():
        existing = existing.parent
    assert isinstance(result, int)
    # Other processes write meanwhile: allow 1 GiB of drift.
    assert abs(result - shutil.disk_usage(existing).free) < 2**30


def test_free_disk_bytes_refuses_relative_path():
    with pytest.raises(ValueError, match="absolute path"):
        facts.FreeDiskBytes().command(path="opt/conda")


@pytest.mark.parametrize(
    ("fields", "message"),
    [([], "needs nvidia-smi --query-gpu field names"), (["name;reboot"], "not nvidia-smi")],
)
def test_nvidia_smi_query_refuses_bad_fields(fields, message):
    with pytest.raises(ValueError, match=message):
        facts.NvidiaSmiQuery().command(fields=fields)


def test_nvidia_smi_query_accepts_cli_comma_string():
    command = StringCommand(facts.NvidiaSmiQuery().command(fields="name, uuid")).get_raw_value()
    assert "--query-gpu=name,uuid" in command


# --- the fallbacks, run for real with the tool missing ----------------------------------------


def path_with_only(tmp_path: Path, *tools: str) -> dict[str, str]:
    """An environment whose PATH holds only the named tools (lspci/mokutil are then missing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed for this test"
        (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir)}


@pytest.mark.parametrize(("value", "expected"), [(1, True), (0, False)])
def test_secure_boot_efivar_fallback(tmp_path, monkeypatch, value, expected):
    # An EFI variable file is 4 attribute bytes then the value; SecureBoot reads 06 00 00 00 01
    # when on (https://github.com/lcp/mokutil/issues/45).
    efivar = tmp_path / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    efivar.write_bytes(bytes([6, 0, 0, 0, value]))
    monkeypatch.setattr(facts, "_SECURE_BOOT_EFIVAR", str(efivar))
    assert run_fact(facts.SecureBootState, env=path_with_only(tmp_path, "od")) is expected


def test_pci_sysfs_fallback(tmp_path, monkeypatch):
    # A sysfs-shaped tree: an A100 with the values NCCL's topology dump read from sysfs
    # (vendor 0x10de, device 0x20b0, class 0x030200; https://github.com/NVIDIA/nccl/issues/1505),
    # next to a virtio device as recorded on the dev machine (tests/fixtures/lspci).
    devices = tmp_path / "devices"
    for slot, vendor, device, pci_class in [
        ("0000:07:00.0", "0x10de", "0x20b0", "0x030200"),
        ("0000:00:03.0", "0x1af4", "0x1041", "0x020000"),
    ]:
        (devices / slot).mkdir(parents=True)
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            (devices / slot / name).write_text(value + "\n")
    command = facts.NvidiaPciDevices().command().replace("/sys/bus/pci/devices", str(devices))
    monkeypatch.setattr(facts.NvidiaPciDevices, "command", lambda self: command)
    result = run_fact(facts.NvidiaPciDevices, env=path_with_only(tmp_path, "cat"))
    assert result == [PciDevice("0000:07:00.0", "3D controller", "10de", "20b0", "Device 20b0")]


def test_nvidia_smi_query_with_wrong_field_count_is_a_fact_error():
    # Real output for fields=name,pci.device_id (tests/facts/.../h100_nvl_name_device_id.json)
    # read as if only "name" had been asked for.
    fact = facts.NvidiaSmiQuery()
    fact.command(fields=["name"])
    with pytest.raises(FactProcessError, match="nvidia-smi --query-gpu output"):
        fact.process(["NVIDIA H100 NVL, 0x232110DE"])
