"""The cluster tier's inventory keys and its refusals before any host is touched."""

from __future__ import annotations

import pytest

from gpufleet.cluster.config import ClusterError, cluster_host, group_name
from gpufleet.commands import validate as validate_command
from gpufleet.inventory import InventoryHost
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages.cluster_tools import cluster_packages


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("10", "wrong type"),
        (True, "wrong type"),
        (0, "declares no link"),
        (-1, "negative"),
        (100_000, "more than 3200"),
    ],
)
def test_interconnect_gbps_is_a_plain_whole_number(value: object, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        NodeSpec.from_host_data({"interconnect_gbps": value})


def test_interconnect_defaults_to_the_guides_10_gbit() -> None:
    assert NodeSpec().interconnect_gbps == 10
    assert NodeSpec.from_host_data({"interconnect_gbps": 400}).interconnect_gbps == 400


@pytest.mark.parametrize("value", ["10.0.0.5;reboot", "$(id)", "-oProxyCommand=x", "a b"])
def test_cluster_address_refuses_what_is_not_an_address(value: str) -> None:
    with pytest.raises(SpecError, match="cluster_address"):
        NodeSpec.from_host_data({"cluster_address": value})


def test_a_host_is_reached_at_its_cluster_address_else_its_ssh_name() -> None:
    plain = InventoryHost("gpu-a", "ssh", "10.0.0.5", data={"gpu_less": True})
    assert cluster_host(plain, "gpufleet-000").address == "10.0.0.5"
    data = {"cluster_address": "10.9.0.5", "interconnect_gbps": 100}
    ib = cluster_host(InventoryHost("gpu-b", "ssh", "10.0.0.6", data=data), "gpufleet-001")
    assert ib.address == "10.9.0.5" and ib.interconnect_gbps == 100
    assert ib.python == "/opt/gpufleet/miniforge3/envs/tf/bin/python"


def test_local_and_bad_data_are_refused_with_the_host_named() -> None:
    with pytest.raises(ClusterError, match="@local"):
        cluster_host(InventoryHost("@local", "local"), "x")
    bad = InventoryHost("gpu-c", "ssh", "10.0.0.7", data={"interconnect_gbps": "fast"})
    with pytest.raises(ClusterError, match="gpu-c: interconnect_gbps"):
        cluster_host(bad, "x")


def test_the_group_is_the_limit_or_the_shared_group() -> None:
    hosts = [InventoryHost(n, "ssh", n, groups=("rack1", "all")) for n in ("a", "b")]
    assert group_name(hosts, []) == "rack1"
    assert group_name(hosts, ["rack*"]) == "rack*"


def test_one_host_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    status = validate_command.main(["@local", "--tier", "cluster"])
    assert status == 2
    assert "needs 2 or more hosts" in capsys.readouterr().err


def test_iperf3_ping_and_nft_are_pinned_where_the_release_is_known() -> None:
    packages, pinned = cluster_packages("ubuntu", "22.04")
    assert pinned and "iperf3=3.9-1+deb11u1ubuntu0.1" in packages
    assert "nftables=1.0.2-1ubuntu3.1" in packages and "libnftables1=1.0.2-1ubuntu3.1" in packages
    packages, pinned = cluster_packages("debian", "12.7")
    assert pinned and "iperf3=3.12-1+deb12u2" in packages and "nftables=1.0.6-2+deb12u2" in packages
    assert cluster_packages("ubuntu", "24.04") == (["iperf3", "iputils-ping", "nftables"], False)
