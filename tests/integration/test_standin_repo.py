"""The stand-in NVIDIA repository end to end: built, signed, served, and read by a real apt."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.matrix.drivers import DRIVER_BRANCHES
from gpufleet.matrix.repo_record import record
from gpufleet.sandbox.serve import start_server, stop_server
from gpufleet.sandbox.standins import RepoInfo, build_nvidia_repo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian/Ubuntu)"),
]
KERNEL = os.uname().release


@dataclass
class Served:
    www: Path
    repo: RepoInfo
    url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    www = tmp_path_factory.mktemp("standin") / "www"
    repo = build_nvidia_repo(
        www, repo_distro="ubuntu2204", repo_arch="x86_64", kernel_release=KERNEL
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pid = start_server(www, "127.0.0.1", port, www.parent / "http.log")
    try:
        yield Served(www, repo, f"http://127.0.0.1:{port}/nvidia/ubuntu2204/x86_64/")
    finally:
        stop_server(pid)


class Apt:
    """apt-get / apt-cache on a throwaway root, so the machine's own apt state is untouched."""

    def __init__(self, root: Path, served: Served):
        self.root = root
        for sub in (
            "etc/apt/preferences.d",
            "etc/apt/apt.conf.d",
            "etc/apt/trusted.gpg.d",
            "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial",
            "var/lib/dpkg",
        ):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.status = root / "var/lib/dpkg/status"
        self.status.write_text("")
        keyring = root / "keyring.gpg"
        shutil.copy(served.repo.path / "gpufleet-sandbox-standin.gpg", keyring)
        (root / "etc/apt/sources.list").write_text(f"deb [signed-by={keyring}] {served.url} /\n")
        self.options = [
            "-o",
            f"Dir={root}",
            "-o",
            f"Dir::State::status={self.status}",
            "-o",
            "APT::Sandbox::User=root",
            "-o",
            "Debug::NoLocking=1",
            "-o",
            "APT::Architecture=amd64",
            "-o",
            "APT::Architectures::=amd64",
        ]

    def __call__(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool, *self.options, *args], capture_output=True, text=True, timeout=120
        )

    def plan(self, *packages: str) -> tuple[set[str], set[str]]:
        """(installed, removed) names of `apt-get -s install`."""
        done = self("apt-get", "-s", "install", *packages)
        assert done.returncode == 0, done.stdout + done.stderr
        inst = set(re.findall(r"^Inst (\S+)", done.stdout, re.M))
        return inst, set(re.findall(r"^Remv (\S+)", done.stdout, re.M))


@pytest.fixture
def apt(tmp_path: Path, served: Served) -> Apt:
    apt = Apt(tmp_path / "aptroot", served)
    done = apt("apt-get", "update")
    assert done.returncode == 0 and "W:" not in done.stderr, done.stdout + done.stderr
    return apt


def test_layout_and_signatures(served: Served) -> None:
    repo = served.repo.path
    assert repo == served.www / "nvidia" / "ubuntu2204" / "x86_64"
    for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg"):
        assert (repo / name).is_file(), name
    keyring = str(served.repo.keyring_file)
    for args in (["InRelease"], ["Release.gpg", "Release"]):
        done = subprocess.run(["gpgv", "--keyring", keyring, *args], cwd=repo, capture_output=True)
        assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        ["gpg", "--show-keys", "--with-colons", str(served.repo.key_file)],
        capture_output=True,
        text=True,
    ).stdout
    assert f"fpr:::::::::{served.repo.fingerprint}:" in shown
    release = (repo / "Release").read_text()
    assert "Label: NVIDIA CUDA" in release and "stand-in" in release


def test_every_deb_is_a_named_stand_in_without_kernel_modules(served: Served) -> None:
    debs = sorted(served.repo.path.glob("*.deb"))
    assert len(debs) == len(served.repo.packages)
    for deb in debs:
        fields = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True)
        name = re.search(r"^Package: (\S+)", fields.stdout, re.M)
        version = re.search(r"^Version: (\S+)", fields.stdout, re.M)
        assert name and version, deb
        assert f"{name[1]}={version[1]}" in served.repo.packages
        assert "gpufleet sandbox stand-in" in fields.stdout
        listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True)
        assert listing.returncode == 0
        assert not re.search(r"\.ko(\.\w+)?$", listing.stdout, re.M), deb
        assert f"./usr/share/doc/{name[1]}/README.gpufleet-standin" in listing.stdout


def test_apt_installs_each_branch_with_its_real_sub_packages(apt: Apt) -> None:
    inst, _ = apt.plan("nvidia-open-570")
    assert {
        "nvidia-driver-570-open",
        "nvidia-utils-570",
        "nvidia-compute-utils-570",
        "nvidia-dkms-570-open",
        "libnvidia-compute-570",
    } <= inst
    inst, _ = apt.plan("nvidia-driver-pinning-580", "cuda-drivers")
    assert {"cuda-drivers-580", "nvidia-driver-580", "nvidia-dkms-580", "nvidia-utils-580"} <= inst
    inst, _ = apt.plan(
        "cuda-toolkit-12-5",
        "libcudnn9-dev-cuda-12=9.3.0.75-1",
        # Both NCCL halves pinned, as the deploy pins them: the repository serves several
        # libnccl2 builds, and apt alone takes the newest, which libnccl-dev's pin refuses.
        "libnccl2=2.27.7-1+cuda12.9",
        "libnccl-dev=2.27.7-1+cuda12.9",
        "nvidia-fabricmanager",
        f"linux-headers-{KERNEL}",
    )
    assert {"cuda-nvcc-12-5", "libcudnn9-cuda-12", "libnccl2"} <= inst


def test_the_virtual_fabric_manager_name_fails_with_apts_own_message(apt: Apt) -> None:
    # As on NVIDIA's repository (NVIDIA/gpu-driver-container#451): the stand-in is the record's.
    fm = record().find("ubuntu2204/x86_64", "nvidia-fabricmanager", 580)[0]
    done = apt("apt-get", "-s", "install", f"nvidia-fabricmanager-580={fm.version}")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Package nvidia-fabricmanager-580 is a virtual package provided by" in out
    assert f"Version '{fm.version}' for 'nvidia-fabricmanager-580' was not found" in out
    inst, _ = apt.plan("nvidia-driver-pinning-580", "nvidia-open", "nvidia-fabricmanager")
    assert {"nvidia-fabricmanager", "nvidia-open-580", "nvidia-utils-580"} <= inst


def test_open_and_proprietary_modules_exclude_each_other(apt: Apt) -> None:
    done = apt("apt-get", "-s", "install", "nvidia-open-570", "cuda-drivers-570")
    assert done.returncode != 0


def test_branch_change_replaces_the_old_branch(apt: Apt, served: Served) -> None:
    installed = [
        "nvidia-open-570",
        "nvidia-driver-570-open",
        "nvidia-dkms-570-open",
        "nvidia-kernel-source-570-open",
        "nvidia-kernel-common-570",
        "libnvidia-compute-570",
        "nvidia-utils-570",
        "nvidia-compute-utils-570",
    ]
    stanzas = (served.repo.path / "Packages").read_text().strip().split("\n\n")
    status = []
    for stanza in stanzas:
        name = re.search(r"^Package: (\S+)", stanza, re.M)
        if name and name[1] in installed:
            lines = [
                line
                for line in stanza.splitlines()
                if not line.startswith(("Filename:", "Size:", "MD5sum:", "SHA1:", "SHA256:"))
            ]
            status.append("\n".join([lines[0], "Status: install ok installed", *lines[1:]]))
    apt.status.write_text("\n\n".join(status) + "\n")
    inst, removed = apt.plan("nvidia-driver-pinning-580", "nvidia-open")
    assert removed == set(installed)
    assert {"nvidia-open", "nvidia-open-580", "nvidia-utils-580", "nvidia-driver-580-open"} <= inst


def test_pinning_file_gives_the_branch_priority_1000(apt: Apt, served: Served) -> None:
    deb = next(served.repo.path.glob("nvidia-driver-pinning-580_*.deb"))
    unpacked = apt.root / "unpacked"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    prefs = unpacked / "etc/apt/preferences.d/nvidia-driver-pinning-580"
    shutil.copy(prefs, apt.root / "etc/apt/preferences.d/")
    policy = apt("apt-cache", "policy", "nvidia-open").stdout
    # The newest recorded R580 build (several are served, as NVIDIA's repository keeps them).
    builds = [p.version for p in record().find("ubuntu2204/x86_64", "nvidia-open", 580)]
    (newest,) = [v for v in builds if v.startswith(DRIVER_BRANCHES[580].latest + "-")]
    assert f"{newest} 1000" in policy


def test_apt_downloads_the_debs_and_their_checksums_match(apt: Apt) -> None:
    done = apt("apt-get", "install", "--download-only", "-y", "nvidia-open-570")
    assert done.returncode == 0, done.stdout + done.stderr
    fetched = {p.name.split("_", 1)[0] for p in apt.root.glob("var/cache/apt/archives/*.deb")}
    assert {"nvidia-open-570", "nvidia-utils-570", "nvidia-driver-570-open"} <= fetched
