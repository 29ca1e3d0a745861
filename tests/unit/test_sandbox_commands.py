"""Command lines the sandbox runs: debootstrap, ip, mount, systemd-nspawn, apt-cacher-ng."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.sandbox import aptproxy, fleet, hosts, image, network, supervisor
from gpufleet.sandbox.state import SandboxError, SandboxState


def test_debootstrap_builds_a_bootable_image_checked_against_a_keyring() -> None:
    spec = image.IMAGES["ubuntu22.04"]
    command = image.debootstrap_command(spec, Path("/x/.tmp"), Path("/k.gpg"))
    assert command[:2] == ["debootstrap", "--variant=minbase"]
    include = next(c for c in command if c.startswith("--include=")).split("=", 1)[1].split(",")
    for needed in ("systemd", "systemd-sysv", "dbus", "openssh-server", "iproute2", "python3"):
        assert needed in include
    assert "--keyring=/k.gpg" in command
    assert command[-3:] == ["jammy", "/x/.tmp", "http://archive.ubuntu.com/ubuntu"]


def test_images_carry_release_updates_and_security_pockets() -> None:
    text = image.sources_list(image.IMAGES["debian12"])
    assert text.splitlines() == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]


def test_apt_goes_through_the_gateway_proxy_except_for_the_gateway_itself() -> None:
    conf = image.apt_proxy_conf("10.231.7.1", 3142)
    assert 'Acquire::http::Proxy "http://10.231.7.1:3142";' in conf
    assert 'Acquire::http::Proxy::10.231.7.1 "DIRECT";' in conf


def test_unknown_image_names_the_choices() -> None:
    with pytest.raises(SandboxError, match=r"debian12, ubuntu20\.04, ubuntu22\.04"):
        image.image_spec("centos7")


def test_host_network_has_no_default_route() -> None:
    commands = network.host_network_commands("gfsb-h3", "10.231.7.13", "gpufleet-sandbox:/s")
    assert ["ip", "netns", "add", "gfsb-h3"] in commands
    assert ["ip", "-n", "gfsb-h3", "addr", "add", "10.231.7.13/24", "dev", "eth0"] in commands
    assert not any("route" in command for command in commands)
    assert ["ip", "link", "set", "gfsb-h3v", "master", "gfsb0", "up"] in commands


def test_veth_names_fit_linux_limit() -> None:
    assert network.veth_name("gfsb-h40") == "gfsb-h40v"
    with pytest.raises(SandboxError, match="15 characters"):
        network.veth_name("gfsb-much-too-long")


def test_overlay_mount_puts_the_image_below_the_hosts_layer() -> None:
    command = hosts.overlay_mount_command(Path("/img"), Path("/u"), Path("/w"), Path("/m"))
    assert command == [
        "mount",
        "-t",
        "overlay",
        "overlay",
        "-o",
        "lowerdir=/img,upperdir=/u,workdir=/w",
        "/m",
    ]


def test_nspawn_boots_systemd_in_the_hosts_namespace() -> None:
    command = supervisor.nspawn_command("gfsb-h1", Path("/r"))
    assert command[0] == "systemd-nspawn"
    for option in (
        "--directory=/r",
        "--register=no",
        "--keep-unit",
        "--network-namespace-path=/run/netns/gfsb-h1",
        "--capability=CAP_NET_ADMIN",
        "--boot",
    ):
        assert option in command


def test_apt_proxy_only_fetches_from_known_archives_on_the_gateway() -> None:
    command = aptproxy.apt_proxy_command(Path("/c"), Path("/run"), Path("/log"))
    assert command[:3] == ["apt-cacher-ng", "-c", "/etc/apt-cacher-ng"]
    for option in ("ForeGround=1", "ForceManaged=1", "BindAddress=10.231.7.1", "Port=3142"):
        assert option in command


def test_wheelhouse_holds_what_the_deploy_installs_for_the_hosts_python() -> None:
    from gpufleet.matrix.locks import lock_text, tool_lock_text
    from gpufleet.sandbox.fleet import wheelhouse_lock

    # The sandbox's hosts install tensorflow-cpu's lock; the wheelhouse is built from the same,
    # at the newest TensorFlow the image's interpreter can run (focal's python3.9: TF 2.20).
    jammy = SandboxState(image="ubuntu22.04", os=["ubuntu", "22.04"])
    focal = SandboxState(image="ubuntu20.04", os=["ubuntu", "20.04"])
    noble = SandboxState(image="ubuntu24.04", os=["ubuntu", "24.04"])
    assert wheelhouse_lock(jammy) == lock_text("tensorflow-cpu", "2.21.0")
    assert wheelhouse_lock(noble) == lock_text("tensorflow-cpu", "2.21.0")
    # focal's venv gets pip 20.0.2, too old for manylinux_2_28 wheels: the lock's pip first.
    assert wheelhouse_lock(focal) == lock_text("tensorflow-cpu", "2.20.0") + tool_lock_text(
        "pip==26.0.1"
    )


def test_too_few_inotify_instances_for_the_fleet_is_refused_with_the_fix(tmp_path) -> None:
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    fleet.check_inotify(16, limit)  # 96 needed
    with pytest.raises(SandboxError, match=r"sysctl -w fs.inotify.max_user_instances=1024"):
        fleet.check_inotify(32, limit)
