"""The sandbox inventory's host and group data."""

from __future__ import annotations

import pytest

from gpufleet.sandbox.inventory import REFUSE_ENV, group_data, host_entries, refused_hosts
from gpufleet.sandbox.state import HostState, SandboxState
from gpufleet.spec import NodeSpec


def _state(with_standins: bool = True) -> SandboxState:
    state = SandboxState(
        image="ubuntu22.04",
        os=["ubuntu", "22.04"],
        hosts=[
            HostState(f"gfsb-h{n}", f"10.231.7.{10 + n}", ssh_key="/s/id", known_hosts="/s/kh")
            for n in (1, 2)
        ],
    )
    if with_standins:
        state.nvidia_repo_url = "http://10.231.7.1:8631/nvidia"
        state.nvidia_repo_key_url = "http://10.231.7.1:8631/nvidia/ubuntu2204/x86_64/k.pub"
        state.nvidia_repo_key_fingerprint = "A" * 40
        state.pip_index_url = "http://10.231.7.1:8631/simple"
    return state


def test_hosts_are_reached_as_root_with_known_host_keys() -> None:
    name, data = host_entries(_state(), refused=set())[0]
    assert name == "gfsb-h1"
    assert data["ssh_hostname"] == "10.231.7.11"
    assert data["ssh_user"] == "root"
    assert data["ssh_key"] == "/s/id"
    assert data["ssh_known_hosts_file"] == "/s/kh"
    assert data["ssh_strict_host_key_checking"] == "yes"
    assert "gpu_less" not in data


def test_group_data_points_the_deploy_at_the_stand_ins_and_is_a_valid_spec() -> None:
    data = group_data(_state())
    assert data["nvidia_repo_url"] == "http://10.231.7.1:8631/nvidia"
    assert data["pip_index_url"] == "http://10.231.7.1:8631/simple"
    spec = NodeSpec.from_host_data(data)
    assert spec.python_env == "venv"
    assert spec.tensorflow_package == "tensorflow-cpu"
    assert spec.gpu_less is True
    assert spec.require_cuda_build is False
    assert spec.reboot == "never"


def test_refused_host_is_declared_a_gpu_server() -> None:
    entries = dict(host_entries(_state(), refused={"gfsb-h2"}))
    assert entries["gfsb-h2"]["gpu_less"] is False
    assert "gpu_less" not in entries["gfsb-h1"]


def test_refusing_an_unknown_host_is_an_error() -> None:
    with pytest.raises(ValueError, match=f"{REFUSE_ENV} names gfsb-h9"):
        host_entries(_state(), refused={"gfsb-h9"})


def test_refused_hosts_reads_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REFUSE_ENV, "gfsb-h4, gfsb-h5")
    assert refused_hosts() == {"gfsb-h4", "gfsb-h5"}
    assert refused_hosts("") == set()
