"""Inventory hosts from `pyinfra INVENTORY debug-inventory --json` (recorded with pyinfra 3.10)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpufleet.inventory import (
    InventoryError,
    host_from_dict,
    load_hosts,
    parse_debug_inventory,
    select_hosts,
)

INVENTORIES = Path(__file__).resolve().parent.parent / "fixtures" / "inventories"


def recorded(name: str) -> list[dict]:
    return parse_debug_inventory((INVENTORIES / name).read_text(), inventory=name)


def sample_hosts():
    return [host_from_dict(entry) for entry in recorded("sample.debug-inventory.json")]


def test_sample_inventory_ssh_settings():
    gpu_a, gpu_b, gpu_c, local = sample_hosts()
    assert (gpu_a.name, gpu_a.connector) == ("gpu-a", "ssh")
    assert (gpu_a.ssh_hostname, gpu_a.ssh_port, gpu_a.ssh_user) == ("10.0.0.5", 2222, "ops")
    assert gpu_a.ssh_key == os.path.expanduser("~/.ssh/id_ed25519")
    assert gpu_a.data["tf_version"] == "2.21.0" and gpu_a.data["driver_branch"] == 580
    assert gpu_a.groups == ("gpu_nodes", "sample")
    # @ssh/NAME: pyinfra's connector fills ssh_hostname; groups listed twice are deduplicated.
    assert (gpu_b.name, gpu_b.ssh_hostname, gpu_b.ssh_user) == (
        "@ssh/gpu-b.example.net",
        "gpu-b.example.net",
        "root",
    )
    assert gpu_b.groups == ("gpu_nodes", "sample")
    # A bare name: the name is the hostname, ssh's own defaults for the rest.
    assert (gpu_c.ssh_hostname, gpu_c.ssh_port, gpu_c.ssh_user, gpu_c.ssh_key) == (
        "gpu-c.example.net",
        None,
        None,
        None,
    )
    assert gpu_c.data == {"driver_branch": 580, "x_rack": "r12"}
    assert local.is_local and local.ssh_hostname is None
    assert local.groups == ("workstations", "sample", "@local")


def test_local_inventory():
    (local,) = [host_from_dict(e) for e in recorded("local.debug-inventory.json")]
    assert local.name == "@local" and local.is_local and local.data == {}


def test_empty_inventory_is_an_error():
    stderr = "    missing.py is neither an inventory file, a (list of) hosts or connectors nor"
    with pytest.raises(InventoryError, match=r"yields no hosts: missing\.py is neither"):
        parse_debug_inventory("[]", inventory="missing.py", stderr=stderr)


def test_not_json_is_an_error():
    with pytest.raises(InventoryError, match="printed no JSON"):
        parse_debug_inventory("--> Loading config...", inventory="x.py")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(InventoryError, match="does not exist"):
        load_hosts(str(tmp_path / "nope.py"))


def test_unsupported_connector_and_password_refused():
    with pytest.raises(InventoryError, match="@docker connector is not supported"):
        host_from_dict({"name": "@docker/ubuntu:22.04", "groups": [], "data": {}})
    with pytest.raises(InventoryError, match="ssh_password is set"):
        host_from_dict({"name": "h", "data": {"ssh_password": "pw"}})
    with pytest.raises(InventoryError, match="not a port number"):
        host_from_dict({"name": "h", "data": {"ssh_port": "twenty-two"}})


def test_limit_by_name_group_and_glob():
    hosts = sample_hosts()
    assert [h.name for h in select_hosts(hosts, ["gpu-a"])] == ["gpu-a"]
    assert len(select_hosts(hosts, ["gpu_nodes"])) == 3
    assert [h.name for h in select_hosts(hosts, ["gpu-*"])] == ["gpu-a", "gpu-c.example.net"]
    assert select_hosts(hosts, []) == hosts
    with pytest.raises(InventoryError, match="matches no host or group; the inventory has"):
        select_hosts(hosts, ["gpu-z"])


def test_real_pyinfra_subprocess_reads_the_sample_inventory():
    """The real CLI, in a subprocess, gives what was recorded (pyinfra 3.10)."""
    hosts = load_hosts(str(INVENTORIES / "sample.py"))
    expected = json.loads((INVENTORIES / "sample.debug-inventory.json").read_text())
    assert [h.name for h in hosts] == [e["name"] for e in expected]
    assert [dict(h.data) for h in hosts] == [e["data"] for e in expected]


def test_real_pyinfra_subprocess_refuses_a_broken_inventory(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("hosts = [1 / 0]\n")
    with pytest.raises(
        InventoryError, match=r"(?s)debug-inventory` failed \(exit 1\).*ZeroDivisionError"
    ):
        load_hosts(str(bad))


def test_a_broken_inventory_leaves_no_pyinfra_debug_log_in_the_working_directory(
    tmp_path, monkeypatch
):
    # review §3 "also noted": pyinfra-debug.log landed in the cwd, with "submit a bug report"
    bad = tmp_path / "inv" / "syntax.py"
    bad.parent.mkdir()
    bad.write_text('gpus = (["gpu-01.example", {"gpu_count": 8})\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InventoryError) as caught:
        load_hosts(str(bad))
    message = str(caught.value)
    assert "SyntaxError" in message and "bug report" not in message
    assert "internal exception" not in message
    assert not (tmp_path / "pyinfra-debug.log").exists()
    moved = Path(message.rsplit("(pyinfra's traceback: ", 1)[1].rstrip(")"))
    assert moved.is_file() and "SyntaxError" in moved.read_text()
    (tmp_path / "pyinfra-debug.log").write_text("the user's own\n")  # one already there stays
    with pytest.raises(InventoryError, match=r"pyinfra's traceback: .*/pyinfra-debug\.log"):
        load_hosts(str(bad))
    assert (tmp_path / "pyinfra-debug.log").exists()
