"""A sandbox host's PCI bus from a recorded lspci listing: the tree, the mount, the option."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from gpufleet.commands.sandbox import build_parser
from gpufleet.sandbox import control, fleet, pci_record, supervisor
from gpufleet.sandbox.state import HostState, SandboxError, SandboxState
from gpufleet.stages.host_probe import HostProbe

H100_SWITCHES = ["0000:07:00.0", "0000:08:00.0", "0000:09:00.0", "0000:0a:00.0"]


def test_the_hgx_h100_record_lists_four_nvswitches_and_eight_gpus() -> None:
    devices = pci_record.load_record("hgx-h100")
    assert [d.device_id for d in devices if d.is_nvswitch] == ["22a3"] * 4
    assert [d.device_id for d in devices if d.is_gpu] == ["2330"] * 8
    mounted = pci_record.mounted_functions(devices)
    assert [pci_record.slot_name(d.slot) for d in mounted] == H100_SWITCHES


def test_nvidias_guide_and_a_bare_metal_listing_give_the_same_bus(tmp_path: Path) -> None:
    """The guide's listing has no domain and no class codes; `lspci -Dnn` on a real HGX H100
    prints both, and the other vendor's VGA there is left out."""
    guide = pci_record.host_tree(tmp_path / "guide", "hgx-h100")
    metal = pci_record.host_tree(tmp_path / "metal", "hgx-h100-rhel")

    def files(tree: Path) -> dict[str, str]:
        return {str(p.relative_to(tree)): p.read_text() for p in tree.rglob("*") if p.is_file()}

    assert files(guide) == files(metal) and len(files(metal)) == 4 * 3


def test_the_tree_holds_what_the_kernel_prints(tmp_path: Path) -> None:
    tree = pci_record.host_tree(tmp_path, "hgx-h100")
    assert tree == tmp_path / pci_record.TREE_DIR
    assert sorted(p.name for p in tree.iterdir()) == H100_SWITCHES
    function = tree / "0000:07:00.0"
    assert (function / "vendor").read_text() == "0x10de\n"
    assert (function / "device").read_text() == "0x22a3\n"
    assert (function / "class").read_text() == "0x068000\n"


def test_the_host_probe_reads_the_tree_as_an_nvswitch_system_without_gpus(tmp_path: Path) -> None:
    """The probe's own shell loop, run by sh over the tree in place of /sys/bus/pci/devices."""
    tree = pci_record.host_tree(tmp_path, "hgx-h100")
    (tmp_path / "root").mkdir()
    assert pci_record.tree_of(tmp_path / "root") == tree
    raw = HostProbe().command(env_dir=str(tmp_path / "env")).get_raw_value()
    done = subprocess.run(
        ["sh", "-c", raw.replace(pci_record.MOUNT_POINT, str(tree))],
        capture_output=True,
        text=True,
        check=True,
    )
    state = HostProbe().process(done.stdout.splitlines())
    assert [(d.slot, d.pci_class, d.device_id) for d in state.pci] == [
        (slot, "0680", "22a3") for slot in H100_SWITCHES
    ]
    assert state.has_nvswitch and state.gpus == []


def test_a_rebuilt_tree_keeps_nothing_of_the_last(tmp_path: Path) -> None:
    (tmp_path / pci_record.TREE_DIR / "0000:ff:00.0").mkdir(parents=True)
    tree = pci_record.host_tree(tmp_path, "hgx-a100")
    assert sorted(p.name for p in tree.iterdir()) == [
        f"0000:{b}:00.0" for b in ["6d", "6e", "6f", "70", "71", "72"]
    ]
    assert {(p / "device").read_text() for p in tree.iterdir()} == {"0x1af1\n"}


def test_nspawn_mounts_the_tree_read_only_over_the_bus(tmp_path: Path) -> None:
    tree = tmp_path / pci_record.TREE_DIR
    command = supervisor.nspawn_command("gfsb-h1", tmp_path / "root", tree)
    assert f"--bind-ro={tree}:/sys/bus/pci/devices" in command
    assert command[-1] == "--boot"
    assert not any(c.startswith("--bind") for c in supervisor.nspawn_command("gfsb-h1", tmp_path))


def test_the_supervisor_boots_a_host_with_its_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[Path | None] = []

    def fake(name: str, root: Path, pci: Path | None = None) -> list[str]:
        seen.append(pci)
        return ["true"]

    monkeypatch.setattr(supervisor, "nspawn_command", fake)
    (tmp_path / "root").mkdir()
    for expected in (None, tmp_path / pci_record.TREE_DIR):
        if expected:
            expected.mkdir()
        sup = supervisor.Supervisor("gfsb-h1", tmp_path / "root", tmp_path / "nspawn.pid")
        sup.preexec = None  # no time namespace (that needs root)
        assert sup.run() == 0
    assert seen == [None, tmp_path / pci_record.TREE_DIR]


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (["gfsb-h1"], "is not HOST=NAME"),
        (["gfsb-h1="], "is not HOST=NAME"),
        (["gfsb-h1=hgx-h100", "gfsb-h1=hgx-a100"], "twice"),
    ],
)
def test_malformed_assignments_are_refused(values: list[str], says: str) -> None:
    with pytest.raises(SandboxError, match=says):
        pci_record.parse_assignments(values)


def test_an_unknown_host_or_record_is_refused_naming_what_there_is() -> None:
    hosts = ["gfsb-h1", "gfsb-h2"]
    with pytest.raises(SandboxError, match=r"gfsb-h3, which this sandbox will not have"):
        pci_record.check_assignments({"gfsb-h3": "hgx-h100"}, hosts)
    with pytest.raises(SandboxError, match=r"no recorded PCI listing 'dgx-9'.*hgx-a100, hgx-h100"):
        pci_record.check_assignments({"gfsb-h1": "dgx-9"}, hosts)
    pci_record.check_assignments({"gfsb-h2": "hgx-h100"}, hosts)


def test_up_refuses_a_bad_record_before_it_touches_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("fleet.up ran")

    monkeypatch.setattr(fleet, "up", never)
    args = build_parser().parse_args(["up", "--hosts", "1", "--pci-record", "gfsb-h2=hgx-h100"])
    assert control.run(args) == 1
    assert "gfsb-h2, which this sandbox will not have (hosts: gfsb-h1)" in capsys.readouterr().err


def test_up_passes_each_hosts_record_on(monkeypatch: pytest.MonkeyPatch) -> None:
    got: dict[str, object] = {}

    def fake_up(*args: object, **kwargs: object) -> SandboxState:
        got.update(kwargs)
        raise SandboxError("stop here")

    monkeypatch.setattr(fleet, "up", fake_up)
    args = build_parser().parse_args(["up", "--pci-record", "gfsb-h1=hgx-h100"])
    assert isinstance(args, argparse.Namespace) and args.pci_record == ["gfsb-h1=hgx-h100"]
    assert control.run(args) == 1
    assert got["pci_records"] == {"gfsb-h1": "hgx-h100"}


def test_state_json_keeps_a_hosts_record_and_reads_older_files() -> None:
    state = SandboxState(image="ubuntu22.04", os=["ubuntu", "22.04"])
    state.hosts.append(HostState("gfsb-h1", "10.231.7.11", pci_record="hgx-h100"))
    data = json.loads(state.to_json())
    assert SandboxState.from_dict(data).hosts[0].pci_record == "hgx-h100"
    del data["hosts"][0]["pci_record"]  # a state.json written before the field
    assert SandboxState.from_dict(data).hosts[0].pci_record == ""
