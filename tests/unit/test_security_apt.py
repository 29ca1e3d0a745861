"""Findings 4, 6 and 8 (security audit): what apt itself reads from the files gpufleet renders.

Real apt-get, apt-cache and apt-config, each confined to a ``Dir::`` tree under tmp_path (its
own etc/apt, lists, cache and dpkg status) with an unsigned ``file:`` repository there.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import OperationError

from gpufleet.operations.apt import insecure_source_fields
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages import host_config, nvidia_repo
from gpufleet.templates import render
from tests.operations.helpers import run_operation

pytestmark = pytest.mark.skipif(
    not (shutil.which("apt-get") and shutil.which("apt-config")), reason="needs apt"
)

HOSTILE_REPO = "https://m.example/repos\nTrusted: true\nX-Ignore: "
# Spellings apt reads as "trust this repository without a signature" (checked below).
TRUSTED_SPELLINGS = ["Trusted: yes", "trusted: yes", "Trusted:yes", "TRUSTED: YES", "Trusted: true"]
# What the old guard ("trusted=yes" / "Trusted: yes" substrings) let through, trusted or not.
OTHER_WEAKENINGS = ["Allow-Insecure: yes", "allow-weak: yes", "Allow-Downgrade-To-Insecure: yes"]


def apt_tree(root: Path) -> Path:
    """An apt ``Dir`` with an unsigned flat repository offering the package gfsectest 1.0."""
    for sub in ("etc/apt/sources.list.d", "etc/apt/apt.conf.d", "etc/apt/preferences.d"):
        (root / sub).mkdir(parents=True)
    for sub in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg"):
        (root / sub).mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("")
    repo = root / "repo"
    repo.mkdir()
    (repo / "Packages").write_text(
        "Package: gfsectest\nVersion: 1.0\nArchitecture: all\n"
        "Filename: ./gfsectest_1.0_all.deb\nSize: 1\nDescription: stand-in\n\n"
    )
    (repo / "Release").write_text("Origin: gfsectest\nLabel: gfsectest\n")
    return repo


def apt_trusts(root: Path, sources_text: str) -> bool:
    """Whether apt-get update accepts the (unsigned) repository and offers its package."""
    (root / "etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").write_text(sources_text)
    options = ["-o", f"Dir={root}", "-o", "APT::Sandbox::User=root"]
    update = subprocess.run(["apt-get", *options, "update"], capture_output=True, text=True)
    policy = subprocess.run(
        ["apt-cache", *options, "policy", "gfsectest"], capture_output=True, text=True
    )
    return update.returncode == 0 and "Candidate: 1.0" in policy.stdout


def sources_for(repo_line: str, extra: str = "") -> str:
    return "Types: deb\nURIs: " + repo_line + "\nSuites: /\n" + extra + ("\n" if extra else "")


def test_finding04_newline_in_repo_url_is_refused_by_the_spec():
    with pytest.raises(SpecError, match="nvidia_repo_url = '\\*\\*\\*' holds a space"):
        NodeSpec.from_host_data({"nvidia_repo_url": HOSTILE_REPO})


def test_finding04_injected_trusted_field_never_reaches_apt(tmp_path):
    repo = apt_tree(tmp_path)
    # What the stage renders for the hostile URL, had the spec let it through: apt would trust
    # the unsigned repository; the operation refuses to write it.
    spec = NodeSpec(nvidia_repo_url=f"file:{repo}\nTrusted: true\nX-Ignore: ")
    rendered = render(
        "nvidia-cuda.sources.j2",
        uri=nvidia_repo.repo_uri(spec, "ubuntu2204", "x86_64"),
        keyring=nvidia_repo.KEYRING,
        distro="ubuntu2204",
        arch="x86_64",
    ).replace("ubuntu2204/x86_64/", "")
    assert apt_trusts(tmp_path, rendered)
    with pytest.raises(OperationError, match="weakens apt's signature check"):
        run_operation(
            "apt.repository",
            facts={},
            key_url="https://m.example/key.pub",
            fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC",
            keyring=nvidia_repo.KEYRING,
            sources=host_config.SOURCES,
            sources_text=rendered,
        )


@pytest.mark.parametrize("field", TRUSTED_SPELLINGS)
def test_finding04_every_trusted_spelling_apt_honours_is_refused(tmp_path, field):
    repo = apt_tree(tmp_path)
    assert not apt_trusts(tmp_path, sources_for(f"file:{repo}/"))  # the control: unsigned
    text = sources_for(f"file:{repo}/", field)
    assert apt_trusts(tmp_path, text)  # apt reads this spelling as Trusted
    assert insecure_source_fields(text) == [field.split(":")[0]]


@pytest.mark.parametrize("field", OTHER_WEAKENINGS)
def test_finding04_other_weakening_fields_are_refused(field):
    assert insecure_source_fields(sources_for("https://m.example/", field)) == [field.split(":")[0]]


def apt_config_dump(root: Path, text: str) -> str:
    conf = root / "95gpufleet-proxy"
    conf.write_text(text)
    return subprocess.run(
        ["apt-config", "-c", str(conf), "dump"], capture_output=True, text=True, check=True
    ).stdout


HOSTILE_PROXY = 'http://proxy.example:3128";\nAPT::Update::Pre-Invoke {"touch /tmp/PWN";};//'


def test_finding06_proxy_with_apt_syntax_is_refused_by_the_spec():
    for value in (HOSTILE_PROXY, 'http://p.example:3128";x', "http://p.example:3128/;x"):
        with pytest.raises(SpecError, match="apt_proxy"):
            NodeSpec.from_host_data({"apt_proxy": value})


def test_finding06_rendered_proxy_is_one_proxy_setting_for_apt(tmp_path):
    # The hostile value, rendered as it is, gives apt a root command (what the spec stops).
    assert "Pre-Invoke" in apt_config_dump(
        tmp_path, render("apt-proxy.conf.j2", proxy=HOSTILE_PROXY)
    )
    # What the spec accepts is rebuilt from its parts: apt reads the two proxy settings alone.
    for value in ("http://us%22er:p%3B%22w@proxy.example:3128/", "http://proxy.example:3128"):
        proxy = NodeSpec.from_host_data({"apt_proxy": value}).apt_proxy_hidden
        assert proxy is not None
        text = render("apt-proxy.conf.j2", proxy=getattr(proxy, "value", proxy))
        dump = apt_config_dump(tmp_path, text)
        assert "Pre-Invoke" not in dump
        settings = [line for line in dump.splitlines() if "::Proxy" in line]
        assert [s.split()[0] for s in settings] == ["Acquire::http::Proxy", "Acquire::https::Proxy"]


def test_finding08_repository_login_goes_to_auth_conf_not_sources():
    spec = NodeSpec.from_host_data({"nvidia_repo_url": "https://repouser:REPO%21PW@m.example/cuda"})
    uri = nvidia_repo.source_uri(spec, "ubuntu2204", "x86_64")
    assert uri == "https://m.example/cuda/ubuntu2204/x86_64/"
    from gpufleet.spec import urls

    line = urls.apt_login(nvidia_repo.repo_uri(spec, "ubuntu2204", "x86_64"))
    assert line == (
        "machine https://m.example/cuda/ubuntu2204/x86_64 login repouser password REPO!PW\n"
    )
