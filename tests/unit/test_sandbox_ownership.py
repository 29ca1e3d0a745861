"""The sandbox touches only what it made (issue 10, finding 21): processes by the exact shape of
their arguments, links and namespaces by the tag they carry, and a subnet already in use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.sandbox import aptproxy, fleet, network, ours, supervisor
from gpufleet.sandbox.state import SandboxError
from tests.waiting import wait_until

STATE = Path("/var/lib/gpufleet-sandbox")


def _sandbox_commands(state: Path) -> dict[str, list[str]]:
    """Each program as the sandbox starts it (from the modules that build the commands)."""
    root = state / "hosts" / "gfsb-h1" / "root"
    return {
        "supervisor": [
            sys.executable,
            "-m",
            fleet.SUPERVISOR_MARKER,
            "--name",
            "gfsb-h1",
            "--root",
            str(root),
            "--pid-file",
            str(state / "hosts" / "gfsb-h1" / "nspawn.pid"),
        ],
        "nspawn": supervisor.nspawn_command("gfsb-h1", root),
        "apt-cacher-ng": aptproxy.apt_proxy_command(
            Path("/var/cache/x"), state / "run", state / "log" / "apt-cacher-ng"
        ),
        "http.server": [sys.executable, "-m", "http.server", "--bind", "10.231.7.1",
                        "--directory", str(state / "www"), "8631"],
        "upstream": [sys.executable, "-m", "gpufleet.sandbox.upstream", "--bind", "10.231.7.1",
                     "--directory", str(state / "www"), "--log", "/x.jsonl", "8631"],
    }  # fmt: skip


@pytest.mark.parametrize(
    "program", ["supervisor", "nspawn", "apt-cacher-ng", "http.server", "upstream"]
)
def test_the_sandboxs_own_programs_are_recognised(program: str) -> None:
    argv = _sandbox_commands(STATE)[program]
    assert ours.is_sandbox_argv(argv, STATE)
    assert not ours.is_sandbox_argv(argv, Path("/elsewhere"))


@pytest.mark.parametrize(
    "argv",
    [
        ["grep systemd-nspawn /var/lib/gpufleet-sandbox/log/gfsb-h1.log", "120"],
        ["grep", "systemd-nspawn", "/var/lib/gpufleet-sandbox/log/gfsb-h1.log"],
        ["less", "/var/lib/gpufleet-sandbox/log/apt-cacher-ng.out", "apt-cacher-ng"],
        ["python3", "-m", "http.server", "--directory", "/var/lib/gpufleet-sandbox/www/x"],
        ["vim", "-m", fleet.SUPERVISOR_MARKER, "/var/lib/gpufleet-sandbox/hosts/x"],
    ],
)
def test_finding_21_words_on_a_command_line_do_not_make_a_process_ours(argv: list[str]) -> None:
    assert not ours.is_sandbox_argv(argv, STATE)


def argv_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def test_finding_21_leftovers_of_an_empty_state_dir_are_nothing(tmp_path: Path) -> None:
    """The audit's repro: an operator's grep of the logs, named like the sandbox's programs, is
    running; an empty state directory has left nothing behind, whatever else runs here."""
    state = tmp_path / "state"
    state.mkdir()
    decoy_name = f"grep systemd-nspawn {state}/log/gfsb-h1.log"
    decoy = subprocess.Popen(["bash", "-c", f"exec -a '{decoy_name}' sleep 120"])
    try:
        # Before its exec the process is bash, whose argv holds the name too: wait for argv[0].
        wait_until(lambda: argv_of(decoy.pid)[0] == decoy_name, "the decoy's exec")
        assert argv_of(decoy.pid) == [decoy_name, "120"]
        assert fleet.leftovers(state) == []
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()


ADDRESSES = [
    {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.2", "prefixlen": 24}]},
]
ROUTES = [
    {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"},
    {"dst": "10.0.0.0/8", "dev": "tun0"},  # broader: our /24 wins, it is not a clash
    {"dst": "192.0.2.0/24", "dev": "eth0"},
    {"type": "local", "dst": "127.0.0.1", "dev": "lo", "table": "local"},
]


def test_a_machine_without_the_subnet_has_no_users() -> None:
    assert network.subnet_users(ADDRESSES, ROUTES) == []


def test_finding_21_an_address_or_route_in_the_subnet_is_a_user() -> None:
    vpn = {
        "ifname": "wg0",
        "addr_info": [{"family": "inet", "local": "10.231.7.5", "prefixlen": 24}],
    }
    routes = [
        *ROUTES,
        {"dst": "10.231.7.128/25", "dev": "tun1"},
        {"dst": "10.231.7.0/24", "dev": "gfsb0"},
    ]
    assert network.subnet_users([*ADDRESSES, vpn], routes) == [
        "address 10.231.7.5/24 on wg0",
        "route 10.231.7.128/25 dev tun1",
        "route 10.231.7.0/24 dev gfsb0",
    ]
    # the sandbox's own bridge is not a clash with itself
    assert network.subnet_users([*ADDRESSES], routes, frozenset({"gfsb0"})) == [
        "route 10.231.7.128/25 dev tun1"
    ]  # fmt: skip


def test_links_and_namespaces_are_tagged_with_the_state_dir() -> None:
    tag = network.owner_tag(Path("/var/lib/gpufleet-sandbox"))
    assert tag == "gpufleet-sandbox:/var/lib/gpufleet-sandbox"
    assert ["ip", "link", "set", "dev", "gfsb0", "alias", tag] in network.bridge_commands(tag)
    commands = network.host_network_commands("gfsb-h2", "10.231.7.12", tag)
    # the namespace is tagged right after it is made, before anything can fail
    assert commands[:2] == [
        ["ip", "netns", "add", "gfsb-h2"],
        ["ip", "-n", "gfsb-h2", "link", "set", "dev", "lo", "alias", tag],
    ]
    assert ["ip", "link", "set", "dev", "gfsb-h2v", "alias", tag] in commands


def test_only_links_tagged_ours_are_ours() -> None:
    links = [
        {"ifname": "gfsb0", "ifalias": "gpufleet-sandbox:/a"},
        {"ifname": "gfsb-h1v", "ifalias": "gpufleet-sandbox:/b"},
        {"ifname": "gfsb-h2v"},
        {"ifname": "eth0", "ifalias": "gpufleet-sandbox:/a"},
    ]
    assert network.named_links(links) == {
        "gfsb0": "gpufleet-sandbox:/a",
        "gfsb-h1v": "gpufleet-sandbox:/b",
        "gfsb-h2v": "",
    }


def test_check_free_names_what_is_in_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = {"family": "inet", "local": "10.231.7.1", "prefixlen": 24}
    answers = {
        ("link", "show"): [{"ifname": "gfsb0", "ifalias": "gpufleet-sandbox:/other"}],
        ("-4", "addr", "show"): [{"ifname": "gfsb0", "addr_info": [gateway]}],
        ("-4", "route", "show", "table", "all"): [],
    }
    monkeypatch.setattr(network, "_ip_json", lambda *args: answers[args])  # stand-in for `ip -j`
    monkeypatch.setattr(network, "named_namespaces", lambda: [])
    with pytest.raises(SandboxError) as caught:
        network.check_free("gpufleet-sandbox:/mine")
    message = str(caught.value)
    assert "10.231.7.0/24" in message and "address 10.231.7.1/24 on gfsb0" in message
    assert "the sandbox whose state is /other" in message
    assert "GPUFLEET_SANDBOX_STATE=<its state dir> gpufleet sandbox down" in message
