"""The fast health check (validation.host.healthcheck): each check on a fake host, and its speed."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from validation.host import healthcheck as hc

FIXTURES = REPO_ROOT / "tests/fixtures"
T4_XML = (FIXTURES / "nvidia_smi/tesla-t4-515.xml").read_text()
CONFIG = {
    "gpu_less": False,
    "gpu_count": 1,
    "driver_branch": 580,
    "driver_packages": ["nvidia-open"],
    "pinning_package": "nvidia-driver-pinning-580",
    "persistenced": True,
    "fabric_manager": "auto",
}
DPKG_OK = (
    "nvidia-open 580.95.05-1ubuntu1 installed\n"
    "nvidia-driver-pinning-580 580.95.05-1ubuntu1 installed\n"
)


def make_root(tmp_path: Path, gpus: int = 1, switches: int = 0, driver: bool = True) -> Path:
    for index in range(gpus + switches):
        device = tmp_path / f"sys/bus/pci/devices/0000:{17 + index:02x}:00.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text("0x10de\n")
        (device / "class").write_text("0x030200\n" if index < gpus else "0x068000\n")
    if driver:
        proc = tmp_path / "proc/driver/nvidia"
        proc.mkdir(parents=True)
        (proc / "version").write_text(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
        )
    return tmp_path


class FakeRun:
    """Answers commands from a table keyed by the argv's first words."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        for key, answer in self.answers.items():
            if " ".join(argv).startswith(key):
                return answer
        return 127, f"{argv[0]}: not found"


def healthy(**overrides: tuple[int, str]) -> FakeRun:
    answers = {
        "dpkg-query": (0, DPKG_OK),
        "nvidia-smi -q -x": (0, T4_XML),
        "nvidia-smi --query-gpu": (0, "0, Enabled\n"),
        "journalctl": (0, ""),
        "systemctl is-active nvidia-persistenced": (0, "active\n"),
        "systemctl is-active nvidia-fabricmanager": (3, "inactive\n"),
    }
    answers.update(overrides)
    return FakeRun(answers)


def statuses(results: list[hc.Result]) -> dict[str, str]:
    return {check: status for check, status, _ in results}


def test_a_healthy_gpu_host_passes_every_check(tmp_path: Path) -> None:
    results = hc.run_checks(CONFIG, hc.Host(healthy(), make_root(tmp_path)))
    assert hc.first_failure(results) is None, results
    assert statuses(results) == {
        "driver_loaded": "pass",
        "driver_packages": "pass",
        "gpu_count": "pass",
        "ecc": "pass",
        "row_remap": "pass",
        "clock_events": "pass",
        "xid": "pass",
        "persistence": "pass",
        "fabric_manager": "skipped",
    }


@pytest.mark.parametrize(
    ("override", "check", "words"),
    [
        (
            {
                "dpkg-query": (
                    0,
                    "nvidia-open 570.195.03-1 installed\n"
                    "nvidia-driver-pinning-580 580.95.05-1 installed\n",
                )
            },
            "driver_packages",
            "not on the pinned branch 580",
        ),
        (
            {"dpkg-query": (0, "nvidia-open 580.95.05-1 installed\n")},
            "driver_packages",
            "not installed: nvidia-driver-pinning-580",
        ),
        (
            {"systemctl is-active nvidia-persistenced": (3, "inactive\n")},
            "persistence",
            "nvidia-persistenced is inactive",
        ),
        ({"nvidia-smi --query-gpu": (0, "0, Disabled\n")}, "persistence", "off on GPU(s) 0"),
        (
            {
                "journalctl": (
                    0,
                    "NVRM: Xid (PCI:0000:17:00): 79, pid=0, GPU has fallen off the bus.",
                )
            },
            "xid",
            "Xid 79 on PCI:0000:17:00",
        ),
        ({"nvidia-smi -q -x": (9, "NVIDIA-SMI has failed")}, "gpu_count", "exited 9"),
    ],
)
def test_each_fault_fails_its_check(tmp_path: Path, override: dict, check: str, words: str) -> None:
    results = hc.run_checks(CONFIG, hc.Host(healthy(**override), make_root(tmp_path)))
    failure = hc.first_failure(results)
    assert failure is not None and failure[0] == check, results
    assert words in failure[1]


def test_a_non_critical_xid_is_reported_not_failed(tmp_path: Path) -> None:
    run = healthy(journalctl=(0, "NVRM: Xid (PCI:0000:17:00): 13, Graphics Exception"))
    results = hc.run_checks(CONFIG, hc.Host(run, make_root(tmp_path)))
    assert ("xid", "pass", "1 non-critical Xid event(s)") in results


def test_unheld_driver_package_without_a_pinning_package_fails(tmp_path: Path) -> None:
    config = {
        **CONFIG,
        "driver_branch": 570,
        "driver_packages": ["nvidia-open-570"],
        "pinning_package": None,
    }
    dpkg = (0, "nvidia-open-570 570.195.03-1 installed\n")
    held = hc.Host(
        healthy(**{"dpkg-query": dpkg, "apt-mark": (0, "nvidia-open-570\n")}), make_root(tmp_path)
    )
    assert statuses(hc.run_checks(config, held))["driver_packages"] == "pass"
    loose = hc.Host(healthy(**{"dpkg-query": dpkg, "apt-mark": (0, "")}), held.root)
    results = hc.run_checks(config, loose)
    assert ("driver_packages", "fail", "neither held nor pinned: nvidia-open-570") in results


def test_fabric_manager_needed_on_an_nvswitch_host(tmp_path: Path) -> None:
    results = hc.run_checks(CONFIG, hc.Host(healthy(), make_root(tmp_path, switches=1)))
    assert hc.first_failure(results) == (
        "fabric_manager",
        "nvidia-fabricmanager is inactive, expected active",
    )


def test_a_gpu_fallen_off_the_bus_fails_the_count(tmp_path: Path) -> None:
    results = hc.run_checks({**CONFIG, "gpu_count": 2}, hc.Host(healthy(), make_root(tmp_path)))
    failure = hc.first_failure(results)
    assert failure is not None and failure[0] == "gpu_count"
    assert "sees 1 GPU(s), expected 2" in failure[1]


def test_gpu_less_host_says_no_gpu_and_still_judges_packages_and_services(
    tmp_path: Path,
) -> None:
    config = {**CONFIG, "gpu_less": True, "gpu_count": None}
    root = make_root(tmp_path, gpus=0, driver=False)
    results = hc.run_checks(config, hc.Host(healthy(), root))
    for check in ("driver_loaded", "gpu_count", "ecc", "row_remap", "clock_events", "xid"):
        status, message = next((s, m) for c, s, m in results if c == check)
        assert status == "skipped" and "no NVIDIA GPU" in message
    assert statuses(results)["driver_packages"] == "pass"
    assert statuses(results)["persistence"] == "pass"
    stopped = healthy(**{"systemctl is-active nvidia-persistenced": (3, "inactive\n")})
    assert hc.first_failure(hc.run_checks(config, hc.Host(stopped, root))) == (
        "persistence",
        "nvidia-persistenced is inactive, expected active",
    )


def test_a_gpu_server_without_gpus_on_the_bus_fails(tmp_path: Path) -> None:
    results = hc.run_checks(CONFIG, hc.Host(healthy(), make_root(tmp_path, gpus=0)))
    assert ("gpu_count", "fail", "no NVIDIA GPU on the PCI bus, 1 expected") in results


def test_the_real_command_on_this_gpu_less_machine_is_fast(tmp_path: Path) -> None:
    """The program Slurm runs, for real here: no GPU, no driver. It must be cheap: under 10 s
    of CPU (its own user + system time, which a loaded machine does not inflate as it does
    the wall clock)."""
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps({**CONFIG, "gpu_less": True, "gpu_count": None}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "validation.host.healthcheck", "--config", str(config), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc = json.loads(proc.stdout)
    assert 0 < cpu_s < 10, cpu_s
    assert proc.returncode == (1 if doc["failure"] else 0)
    assert any(status == "skipped" and "no NVIDIA GPU" in msg for _, status, msg in doc["results"])


def test_an_unreadable_config_is_exit_2(tmp_path: Path) -> None:
    assert hc.main(["--config", str(tmp_path / "missing.json")]) == 2
