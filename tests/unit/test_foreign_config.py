"""Foreign configuration (review finding 8, issue 35 item 8): read by the probe, reported by
the plan and `gpufleet drift`, repaired where gpufleet owns the behaviour."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet.drift.plan import REPORTED, PlanRun, build_report
from gpufleet.operations import files as gpufleet_files
from gpufleet.spec import NodeSpec
from gpufleet.stages import foreign, foreign_apt
from gpufleet.stages.host_config import FileLine, HostConfig
from gpufleet.stages.host_probe import HostState, parse_probe
from gpufleet.stages.node import NodePlan
from gpufleet.stamp.canonical import digest
from gpufleet.stamp.inputs import plan_view
from tests import pyinfra_cli
from tests.unit.fake_fleet import PROBE, FakeGpuHost

NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
# Recorded: the probe's apt sections on the Debian 12 control machine this was written on
# (`sh -c` of HostProbe's command, 2026-12-04), cut to its first stanza and one pin.
DEBIAN12 = [
    f"{PROBE}apt_sources",
    "/etc/apt/sources.list.d/debian.sources\tTypes: deb",
    "/etc/apt/sources.list.d/debian.sources\tURIs: http://deb.debian.org/debian",
    "/etc/apt/sources.list.d/debian.sources\tSuites: bookworm bookworm-updates",
    "/etc/apt/sources.list.d/debian.sources\tComponents: main",
    "/etc/apt/sources.list.d/debian.sources\t"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
    "/etc/apt/sources.list.d/debian.sources\t",
    f"{PROBE}apt_pins",
    "/etc/apt/preferences.d/nodejs\tPackage: nodejs",
    "/etc/apt/preferences.d/nodejs\tPin: origin deb.nodesource.com",
    "/etc/apt/preferences.d/nodejs\tPin-Priority: 600",
    f"{PROBE}apt_keyrings",
    "/etc/apt/trusted.gpg.d/debian-archive-bookworm-stable.asc",
]
# What each foreign setting of this test looks like in the probe (constructed in the formats
# of sources.list(5), apt_preferences(5), systemd.unit(5), modules-load.d(5), modprobe.d(5)).
FOREIGN = [
    f"{PROBE}apt_sources",
    f"/etc/apt/sources.list.d/cuda.list\tdeb [signed-by=/usr/share/keyrings/x.gpg] {NVIDIA} /",
    f"/etc/apt/sources.list\tdeb {NVIDIA} /",
    "/etc/apt/sources.list\tdeb http://archive.ubuntu.com/ubuntu jammy main",
    f"{PROBE}apt_pins",
    "/etc/apt/preferences.d/cuda-repository-pin-600\tPackage: *",
    "/etc/apt/preferences.d/cuda-repository-pin-600\tPin: release l=NVIDIA CUDA",
    "/etc/apt/preferences.d/cuda-repository-pin-600\tPin-Priority: 600",
    f"{PROBE}apt_keyrings",
    "/etc/apt/trusted.gpg.d/cuda-archive-keyring.gpg",
    f"{PROBE}unit_overrides",
    "/etc/systemd/system/gpufleet-periodic.service.d/off.conf",
    "/run/systemd/system/nvidia-persistenced.service -> /dev/null",
    f"{PROBE}module_loaders",
    "/etc/modules-load.d/gpu.conf\tnouveau",
    "/lib/modprobe.d/x.conf\tinstall nouveau /sbin/modprobe --ignore-install nouveau",
    "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf\tblacklist nouveau",
    "/etc/modprobe.d/quiet.conf\tinstall nouveau /bin/false",
]


def plan_of(lines: list[str], **data) -> NodePlan:
    state = parse_probe([f"{PROBE}os", "ID=ubuntu", 'VERSION_ID="22.04"', *lines])
    spec = NodeSpec.from_host_data(data)
    resolution = spec.resolve(
        os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=["20b2"]
    )
    return NodePlan(spec=spec, state=state, resolution=resolution)


def test_a_plain_debian_host_has_no_foreign_setting():
    plan = plan_of(DEBIAN12)
    assert foreign_apt.apt_sources(plan.state.config.apt_sources) == [
        foreign_apt.SourceEntry(
            "/etc/apt/sources.list.d/debian.sources", ("http://deb.debian.org/debian",)
        )
    ]
    assert foreign.findings(plan) == []


def test_each_foreign_setting_is_found_and_repaired_only_where_gpufleet_owns_it():
    found = {(f.kind, f.path): f.repaired for f in foreign.findings(plan_of(FOREIGN))}
    assert found == {
        ("apt-source", "/etc/apt/sources.list.d/cuda.list"): True,  # NVIDIA's alone: removed
        ("apt-source", "/etc/apt/sources.list"): False,  # the admin's main file: reported
        ("apt-pin", "/etc/apt/preferences.d/cuda-repository-pin-600"): True,
        ("keyring", "/etc/apt/trusted.gpg.d/cuda-archive-keyring.gpg"): False,
        ("unit", "/etc/systemd/system/gpufleet-periodic.service.d/off.conf"): True,
        ("unit", "/run/systemd/system/nvidia-persistenced.service"): False,  # the vendor's
        ("nouveau", "/etc/modules-load.d/gpu.conf"): True,
        ("nouveau", "/lib/modprobe.d/x.conf"): False,  # a package's file
    }
    sentences = foreign.reported(plan_of(FOREIGN))
    assert (
        "/run/systemd/system/nvidia-persistenced.service masks nvidia-persistenced.service "
        "(gpufleet keeps it)" in sentences
    )


@pytest.mark.parametrize(
    ("path", "line", "loads"),
    [
        ("/etc/modules", "nouveau", True),
        ("/etc/modules-load.d/a.conf", "; nouveau", False),
        ("/etc/modules-load.d/a.conf", "nouveau # for the console", True),
        ("/etc/modprobe.d/a.conf", "softdep drm pre: nouveau", True),
        ("/etc/modprobe.d/a.conf", "softdep nouveau pre: drm", False),
        ("/etc/modprobe.d/a.conf", "alias pci:v000010DE* nouveau", True),
        ("/etc/modprobe.d/a.conf", "alias nouveau off", False),
        ("/etc/modprobe.d/a.conf", "options nouveau modeset=1", False),
        ("/etc/modprobe.d/a.conf", "install nouveau /usr/bin/true", False),
    ],
)
def test_nouveau_loaders_as_modprobe_and_modules_load_read_them(path, line, loads):
    assert foreign.nouveau_loads(path, line) is loads


def test_gpu_less_hosts_and_hosts_without_periodic_checks_are_not_asked_about_them():
    plan = plan_of(FOREIGN, gpu_less=True, periodic_checks=False)
    kinds = {(f.kind, f.path) for f in foreign.findings(plan)}
    assert ("nouveau", "/etc/modules-load.d/gpu.conf") not in kinds
    assert ("unit", "/etc/systemd/system/gpufleet-periodic.service.d/off.conf") not in kinds


def test_a_new_drop_in_changes_the_stamp_inputs():
    """The probe's configuration is part of the plan a stamp is made from: a drop-in that
    appears after a stamped run makes the next run plan in full."""
    before = plan_of(DEBIAN12)
    after = plan_of([*DEBIAN12, *FOREIGN[10:12]])
    assert after.state.config.unit_overrides and not before.state.config.unit_overrides
    assert digest(plan_view(before)) != digest(plan_view(after))


def test_the_probe_reads_every_section_on_a_real_shell(tmp_path: Path) -> None:
    """HostProbe's command run by this machine's sh: the configuration sections are there,
    and parse into a HostConfig (of this machine, whatever it holds)."""
    from gpufleet.stages.host_probe import HostProbe

    command = HostProbe().command(env_dir=str(tmp_path / "env"), disk_paths=("/",))
    done = subprocess.run(
        ["sh", "-c", command.get_raw_value()], capture_output=True, text=True, check=True
    )
    names = [line for line in done.stdout.splitlines() if line.startswith(PROBE)]
    for section in ("apt_sources", "apt_pins", "unit_overrides", "module_loaders", "acng_admin"):
        assert f"{PROBE}{section}" in names
    assert isinstance(HostProbe().process(done.stdout.splitlines()).config, HostConfig)


def test_lines_commented_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    """The nouveau repair's script run by a real sh and awk: the loading line is commented
    out with the note, the file's other lines and mode stay."""
    path = tmp_path / "gpu.conf"
    path.write_text("# mine\nloop\n  nouveau  \nnouveau_x\n")
    path.chmod(0o640)
    command = gpufleet_files._COMMENT
    subprocess.run(
        ["sh", "-c", command, "x", str(path), foreign.NOUVEAU_NOTE, "nouveau"], check=True
    )
    assert path.read_text() == (f"# mine\nloop\n# {foreign.NOUVEAU_NOTE}:   nouveau  \nnouveau_x\n")
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.conf"]  # no temp file left


def _plan(tmp_path: Path, fake: FakeGpuHost) -> tuple[subprocess.CompletedProcess, list]:
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"hosts = [('@fake/gpu1', {fake.data('@fake/gpu1')!r})]\n")
    return pyinfra_cli.plan(inventory, pyinfra_cli.GPU_NODE, "-vv", base=pyinfra_cli.BARE)


def test_a_provisioned_host_with_foreign_settings_plans_their_repair_and_drift_names_all(
    tmp_path: Path,
) -> None:
    fake = FakeGpuHost(provisioned=True, config_lines=tuple(FOREIGN))
    result, plan = _plan(tmp_path, fake)
    assert result.returncode == 0, result.stderr[-3000:]
    changing = [op["name"].rsplit(" | ", 1)[-1] for op in plan if op["hosts_with_change"]]
    assert changing == [
        "/etc/apt/sources.list.d/cuda.list: foreign source of NVIDIA's repository removed",
        "/etc/modules-load.d/gpu.conf: nouveau loader commented out",
        "/etc/apt/preferences.d/cuda-repository-pin-600: foreign pin of NVIDIA packages removed",
        "/etc/systemd/system/gpufleet-periodic.service.d/off.conf: "
        "foreign overrides of gpufleet's units removed",
    ]
    assert "[@fake/gpu1] gpufleet drift: /etc/apt/sources.list adds NVIDIA's" in result.stderr
    report = build_report(["@fake/gpu1"], PlanRun(result.returncode, result.stdout, result.stderr))
    host = report.hosts["@fake/gpu1"]
    assert host.status == "drift"
    assert host.changes[:4] == [
        "/etc/apt/sources.list.d/cuda.list adds NVIDIA's repository beside gpufleet's source "
        "(the deploy removes it)",
        "/etc/modules-load.d/gpu.conf loads nouveau (the deploy comments the line out)",
        "/etc/apt/preferences.d/cuda-repository-pin-600 pins NVIDIA packages beside gpufleet's "
        "branch lock (the deploy removes it)",
        "/etc/systemd/system/gpufleet-periodic.service.d/off.conf: foreign override of "
        "gpufleet's periodic units (the deploy removes it)",
    ]
    reported = [c for c, op in zip(host.changes, host.operations, strict=True) if op == REPORTED]
    assert reported == foreign.reported(plan_of(FOREIGN)), (
        "every finding left to the administrator is in drift too"
    )


def test_a_provisioned_host_without_foreign_settings_still_plans_nothing(tmp_path: Path):
    result, plan = _plan(tmp_path, FakeGpuHost(provisioned=True, config_lines=tuple(DEBIAN12)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [op["name"] for op in plan if op["hosts_with_change"]] == []
    assert foreign.DRIFT_PREFIX not in result.stderr


def test_sentences_name_the_file_of_each_reported_finding():
    config = HostConfig(apt_keyrings=("/etc/apt/trusted.gpg.d/nvidia.gpg",))
    plan = NodePlan(NodeSpec(), HostState(config=config), None)
    assert foreign.reported(plan) == [
        "/etc/apt/trusted.gpg.d/nvidia.gpg trusts an NVIDIA key for every apt source"
    ]
    assert FileLine("/x", "") == FileLine("/x", "")
