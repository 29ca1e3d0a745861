"""The sandbox's address plan and state.json round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.sandbox.state import (
    MAX_HOSTS,
    NO_SANDBOX,
    HostState,
    SandboxError,
    SandboxState,
    check_host_count,
    host_address,
    host_index,
    host_name,
    load_state,
    save_state,
)


def test_address_plan_follows_the_contract() -> None:
    assert [host_name(n) for n in (1, 2, 12)] == ["gfsb-h1", "gfsb-h2", "gfsb-h12"]
    assert [host_address(n) for n in (1, 4, MAX_HOSTS)] == [
        "10.231.7.11",
        "10.231.7.14",
        "10.231.7.50",
    ]
    assert host_index("gfsb-h7") == 7


@pytest.mark.parametrize("bad", [0, -1, MAX_HOSTS + 1])
def test_host_counts_outside_the_plan_are_refused(bad: int) -> None:
    with pytest.raises(SandboxError, match=f"between 1 and {MAX_HOSTS}"):
        check_host_count(bad)


@pytest.mark.parametrize("bad", ["gfsb-hx", "web-1", "gfsb-h"])
def test_host_index_refuses_foreign_names(bad: str) -> None:
    with pytest.raises(SandboxError, match="not a sandbox host name"):
        host_index(bad)


def test_state_round_trips_through_json(tmp_path: Path) -> None:
    state = SandboxState(
        image="ubuntu22.04",
        os=["ubuntu", "22.04"],
        hosts=[
            HostState(
                "gfsb-h1",
                "10.231.7.11",
                ssh_key="/k",
                supervisor_pid=42,
                netns_inode=9,
                layers=["/s/hosts/gfsb-h1"],
                pci_record="hgx-h100",
            )
        ],
        pids={"apt_proxy": 7},
    )
    path = save_state(state, tmp_path)
    data = json.loads(path.read_text())
    assert data["hosts"][0] == {
        "name": "gfsb-h1",
        "address": "10.231.7.11",
        "port": 22,
        "user": "root",
        "ssh_key": "/k",
        "known_hosts": "",
        "supervisor_pid": 42,
        "netns_inode": 9,
        "layers": ["/s/hosts/gfsb-h1"],
        "pci_record": "hgx-h100",
    }
    assert load_state(tmp_path) == state
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_state_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="run `gpufleet sandbox up` first") as info:
        load_state(tmp_path)
    assert NO_SANDBOX in str(info.value)


def test_corrupt_state_says_how_to_recover(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(SandboxError, match="sandbox down"):
        load_state(tmp_path)
